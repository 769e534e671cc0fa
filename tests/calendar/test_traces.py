"""The trace readers on small fixtures written here, bad rows included."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuopt.calendar.traces import TraceJob, read_trace, trace_format
from gpuopt.errors import ProblemError

THETAGPU = """\
,job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,node_hour,new_status
0,11,1.0,1.0,0,2.0,0,2.0,1000.0,5.0,300.5,3600.0,0.1,Pass
1,12,1.0,1.0,0,1.0,0,1.0,900.0,7.0,100.0,1800.0,0.1,Failed
2,13,1.0,1.0,0,1.0,0,1.0,950.0,1.0,abc,1800.0,0.1,Pass
3,14,1.0,1.0,0,0.0,0,0.0,960.0,1.0,10.0,1800.0,0.1,Pass
"""

HELIOS = """\
u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status
5,1,1,1,1,0,84,0,Pass
3,1,0,4,1,10,50,0,Pass
9,2,16,8,2,20,600,0,Killed
7,2,2,1,1,-3,10,0,Pass
8,2,1.5,1,1,5,10,0,Pass
"""

SWF = """\
; Version: 2.2
; Computer: a fixture
1 0 10 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1
2 30 -1 50 -1 -1 -1 8 -1 -1 1 1 1 1 1 -1 -1 -1
3 40 0 -1 2 -1 -1 2 100 -1 0 1 1 1 1 -1 -1 -1
4 45 0 20 0 -1 -1 0 100 -1 1 1 1 1 1 -1 -1 -1
5 50 0 20 2 -1 -1 2 100
6 x 0 20 2 -1 -1 2 100 -1 1 1 1 1 1 -1 -1 -1
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_thetagpu_reads_nodes_as_eight_gpus_from_the_earliest_submit(tmp_path: Path) -> None:
    """Job 12 is the earliest (900): the origin. Job 11 asks for 2 nodes, so 16 GPUs; its
    recorded wait and walltime are kept. Row 3 (job 13) has a bad run_time, row 4 no node."""
    trace = read_trace(write(tmp_path, "t.csv", THETAGPU))
    assert trace.format == "thetagpu"
    assert trace.jobs == (
        TraceJob("12", 0.0, 100.0, 1800.0, 8, 1, 7.0),
        TraceJob("11", 100.0, 300.5, 3600.0, 16, 2, 5.0),
    )
    assert trace.skipped == {"bad_row": 1, "no_gpu": 1}
    assert trace.first_bad is not None and "row 4: field 'run_time' is 'abc'" in trace.first_bad


def test_thetagpu_strict_refuses_the_bad_row_naming_row_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", THETAGPU)
    with pytest.raises(
        ProblemError, match=r"t\.csv: row 4: field 'run_time' is 'abc', not a number\.$"
    ):
        read_trace(path, "thetagpu", strict=True)


def test_helios_submit_is_the_running_sum_of_every_row(tmp_path: Path) -> None:
    """Intervals 0, 10, 20 (the GPU-less row 3 counts), then a negative interval (bad,
    adds nothing) and a fractional gpu_num (bad, but its interval 5 counts): submits
    0 and 30; u_id is the id; no walltime."""
    trace = read_trace(write(tmp_path, "h.csv", HELIOS))
    assert trace.format == "helios"
    assert trace.jobs == (
        TraceJob("5", 0.0, 84.0, None, 1, 1),
        TraceJob("9", 30.0, 600.0, None, 16, 2),
    )
    assert trace.skipped == {"bad_row": 2, "no_gpu": 1}
    with pytest.raises(
        ProblemError, match=r"row 5: field 'interval' is '-3', not a number of at least 0\."
    ):
        read_trace(tmp_path / "h.csv", strict=True)


def test_swf_reads_the_standard_fields(tmp_path: Path) -> None:
    """Job 1: 4 processors, requested time 200, wait 10. Job 2: requested 8 processors
    (allocated unknown), no requested time, no wait. Job 3 has no run time, job 4 no
    processor; line 7 has 9 fields, line 8 a submit time 'x'."""
    trace = read_trace(write(tmp_path, "log.swf", SWF))
    assert trace.format == "swf"
    assert trace.jobs == (
        TraceJob("1", 0.0, 100.0, 200.0, 4, 1, 10.0),
        TraceJob("2", 30.0, 50.0, None, 8, 1, None),
    )
    assert trace.skipped == {"bad_row": 2, "no_gpu": 1, "no_runtime": 1}
    assert (
        trace.first_bad is not None and "line 7: has 9 fields, not the 18 of SWF" in trace.first_bad
    )
    with pytest.raises(ProblemError, match=r"line 7: has 9 fields"):
        read_trace(tmp_path / "log.swf", strict=True)


def test_the_format_is_told_by_suffix_or_header(tmp_path: Path) -> None:
    assert trace_format(write(tmp_path, "a.csv", HELIOS)) == "helios"
    assert trace_format(write(tmp_path, "b.txt", THETAGPU)) == "thetagpu"
    with pytest.raises(ProblemError, match="cannot tell the trace format"):
        trace_format(write(tmp_path, "c.csv", "a,b\n1,2\n"))


def test_a_missing_column_or_file_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="the header has no column 'run_time'"):
        read_trace(write(tmp_path, "h.csv", "u_id,gpu_num,node_num,interval\n1,1,1,0\n"), "helios")
    with pytest.raises(ProblemError, match="no such file"):
        read_trace(tmp_path / "absent.swf")
