"""Traffic readers on tiny CSV fixtures written by the tests (never the real traces)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gpuopt.errors import ProblemError
from gpuopt.readers.traffic import (
    aggregate,
    parse_timestamp,
    read_azure_llm,
    read_hourly_csv,
    read_servegen_aggregate,
    read_servegen_client,
    read_servegen_pool,
)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def values(series_values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(v) else float(v) for v in series_values]


# --------------------------------------------------------------------------- hourly CSV
def test_hourly_csv_with_seconds_averages_per_hour_and_keeps_gaps(tmp_path: Path) -> None:
    path = write(
        tmp_path / "h.csv",
        "timestamp,value\n0,10\n1800,20\n3600,5\n10800,7\n",  # hour 2 has no row
    )
    series = read_hourly_csv(path)
    assert values(series.values) == [15.0, 5.0, None, 7.0]
    assert series.step_seconds == 3600 and series.start_seconds == 0.0
    assert series.missing == 1 and len(series) == 4
    assert series.start_hour_of_week == 72  # 1970-01-01 was a Thursday


def test_hourly_csv_with_iso_timestamps_any_order_no_header(tmp_path: Path) -> None:
    path = write(
        tmp_path / "h.csv",
        "2025-03-03T01:30:00Z,4\n"  # a Monday
        "2025-03-03T00:00:00+00:00,1\n"
        "2025-03-03 00:59:59,3\n"
        "2025-03-03T03:00:00+01:00,8\n"  # 02:00 UTC
        "2025-03-03T03:10:00.1234567,\n",  # empty value: missing; 7 fraction digits
    )
    series = read_hourly_csv(path)
    assert values(series.values) == [2.0, 4.0, 8.0, None]
    assert series.start_hour_of_week == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no rows"),
        ("timestamp,value\n", "no rows"),
        ("0,1,2\n", "line 1: expected 2 fields"),
        ("0,1\nyesterday,2\n", "line 2: timestamp 'yesterday' is neither ISO 8601 nor"),
        ("0,1\n3600,lots\n", "line 2: value 'lots' is not a number"),
        ("0,1\n3600,-4\n", "line 2: value -4 is negative"),
        ("0,inf\n", "line 1: value 'inf' is not a finite number"),
        ("0,1\n2025-01-01T00:00:00,2\n", "is ISO 8601 but earlier rows are seconds"),
        ("0,\n3600,nan\n", "every value is missing"),
        ("0,1\n1e15,1\n", "more than the 87840 a series may have"),
    ],
)
def test_hourly_csv_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "h.csv", text)
    with pytest.raises(ProblemError) as caught:
        read_hourly_csv(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(path)) and str(caught.value).endswith(".")


def test_hourly_csv_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such file"):
        read_hourly_csv(tmp_path / "missing.csv")
    with pytest.raises(ProblemError, match="is a folder"):
        read_hourly_csv(tmp_path)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00\x01garbage")
    with pytest.raises(ProblemError, match="cannot be read as UTF-8"):
        read_hourly_csv(binary)


def test_parse_timestamp_and_aggregate() -> None:
    assert parse_timestamp("1970-01-01T01:00:00Z") == 3600.0
    assert parse_timestamp(" 12.5 ") == 12.5
    with pytest.raises(ValueError):
        parse_timestamp("nan")
    series = aggregate([0, 60, 600], [1.0, math.nan, 3.0], step_seconds=300)
    assert values(series.values) == [1.0, None, 3.0]
    with pytest.raises(ProblemError, match="no rows"):
        aggregate([], [])


# --------------------------------------------------------------------------- ServeGen
AGGREGATE = (
    "category,model,window_start_s,total_rate_rps,active_clients,total_clients\n"
    + "".join(f"language,m-small,{600 * i},{i},3,5\n" for i in range(12))
    + "".join(f"reason,deepseek-r1,{600 * i},100,1,1\n" for i in range(6))
)


def test_servegen_aggregate(tmp_path: Path) -> None:
    path = write(tmp_path / "aggregate_rate_per_600s.csv", AGGREGATE)
    series = read_servegen_aggregate(path, "m-small")
    assert series.values.tolist() == [2.5, 8.5]  # means of 0..5 and 6..11
    assert read_servegen_aggregate(path, "deepseek-r1", category="reason").values.tolist() == [
        100.0
    ]
    with pytest.raises(ProblemError, match=r"no rows for model 'm-large' \(models: deepseek"):
        read_servegen_aggregate(path, "m-large")
    with pytest.raises(ProblemError, match="no rows for model 'language/deepseek-r1'"):
        read_servegen_aggregate(path, "deepseek-r1", category="language")
    bad = write(tmp_path / "bad.csv", "category,model,window_start_s\nlanguage,m-small,0\n")
    with pytest.raises(ProblemError, match="has no total_rate_rps column"):
        read_servegen_aggregate(bad, "m-small")


def test_servegen_clients_and_pool(tmp_path: Path) -> None:
    folder = tmp_path / "m-small"
    folder.mkdir()
    write(folder / "chunk-0-trace.csv", "0,0,0,,0,0\n600,6,1.2,Gamma,0.5,2\n3600,2,1,Gamma,1,1\n")
    write(folder / "chunk-1-trace.csv", "0,4,1,Weibull,1,1\n600,0,0,,0,0\n")
    one = read_servegen_client(folder / "chunk-0-trace.csv")
    assert one.values.tolist() == [3.0, 2.0]
    pool = read_servegen_pool(folder)
    assert pool.values.tolist() == [5.0, 2.0]  # windows: 0+4, 6+0 -> mean 5; then 2
    write(folder / "chunk-2-trace.csv", "0,x,1\n")
    with pytest.raises(ProblemError, match=r"chunk-2-trace.csv, line 1: rate_rps 'x'"):
        read_servegen_pool(folder)
    with pytest.raises(ProblemError, match="no chunk-"):
        read_servegen_pool(tmp_path)


# --------------------------------------------------------------------------- Azure
def test_azure_requests_and_tokens_per_minute(tmp_path: Path) -> None:
    rows = [
        "2023-11-16 18:15:46.6805900,100,10",  # partial first minute: left out
        "2023-11-16 18:16:01.0000000,200,20",
        "2023-11-16 18:16:30.5000000,400,40",
        "2023-11-16 18:18:59.9999999,60,6",  # 18:17 has no request: rate 0
        "2023-11-16 18:19:00.1000000,1,1",  # partial last minute: left out
    ]
    path = write(
        tmp_path / "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows)
    )
    requests = read_azure_llm(path)
    assert requests.values.tolist() == pytest.approx([2 / 60, 0.0, 1 / 60])
    assert requests.step_seconds == 60
    context = read_azure_llm(path, measure="context_tokens")
    assert context.values.tolist() == pytest.approx([10.0, 0.0, 1.0])
    with pytest.raises(ProblemError, match="at least 3 are needed"):
        read_azure_llm(path, step_seconds=3600)  # one hour: no hourly series at all
    with pytest.raises(ProblemError, match="measure must be one of"):
        read_azure_llm(path, measure="bytes")  # type: ignore[arg-type]
    broken = write(tmp_path / "broken.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nsoon,1,1\n")
    with pytest.raises(ProblemError, match="line 2: TIMESTAMP 'soon' is not ISO 8601"):
        read_azure_llm(broken)
