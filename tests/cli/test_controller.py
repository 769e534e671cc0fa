"""``gpuopt controller``: its flags, its output, and what it writes, over an in-memory API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuopt.cli import controller as command
from gpuopt.live.api import EVENTS, LEASES, PODS
from tests.cli.conftest import run
from tests.live.memory_api import MemoryApi, fragmented


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> MemoryApi:
    """The API ``gpuopt controller`` talks to: four half-busy nodes, two waiting 8-GPU pods."""
    memory = MemoryApi(fragmented())
    monkeypatch.setattr(command, "connect", lambda args: memory)
    return memory


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "give --kubeconfig PATH or --in-cluster"),
        (["--in-cluster", "--context", "prod"], "--context names a context of --kubeconfig"),
        (["--kubeconfig", "/no/such/file"], "--kubeconfig: no such file '/no/such/file'"),
        (["--in-cluster", "--questions", "defrag,calendar"], "unknown question 'calendar'"),
        (["--in-cluster", "--apply", "--dry-run", "server"], "not allowed with argument"),
        (["--in-cluster", "--kubeconfig", "k"], "--kubeconfig and --in-cluster exclude each"),
        (["--in-cluster", "--max-evictions", "-1"], "--max-evictions"),
        (["--in-cluster", "--period", "0"], "--period"),
        (["--in-cluster", "--method", "best"], "method 'best' is not known"),
    ],
)
def test_bad_flags_are_one_sentence_and_exit_2(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["controller", *args], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_client_dry_run_prints_the_actions_and_writes_nothing(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["controller", "--in-cluster", "--once"], capsys)
    assert code == 0 and api.writes == []
    lines = out.splitlines()
    # two moves empty two nodes: 2 cordons, then a hold and an eviction per move
    assert [line.split()[:2] for line in lines] == [
        ["would", "cordon"],
        ["would", "cordon"],
        ["would", "hold"],
        ["would", "evict"],
        ["would", "hold"],
        ["would", "evict"],
    ]
    assert err.startswith("gpuopt controller: 6 actions (6 would)")


def test_json_prints_each_action_with_its_event(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["controller", "--in-cluster", "--once", "--json", "--quiet"], capsys)
    assert code == 0
    actions = [json.loads(line) for line in out.splitlines()]
    assert len(actions) == 6
    for action in actions:
        event = action["event"]
        assert event["regarding"]["name"] == action["name"]
        assert event["action"] == action["verb"].capitalize()
        assert event["reportingController"] == "gpuopt.io/controller"


def test_server_dry_run_sends_every_write_as_a_dry_run(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["controller", "--in-cluster", "--once", "--dry-run", "server"], capsys)
    assert code == 0 and len(out.splitlines()) == 6
    assert api.writes and all(dry for *_, dry in api.writes)
    assert api.of(LEASES) == []  # a dry run takes no Lease


def test_apply_acts_as_the_leader_and_gives_the_lease_up(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["controller", "--in-cluster", "--once", "--apply", "--quiet", "--identity", "ci-1"]
    args += ["--lease-namespace", "ops", "--max-evictions", "1"]
    code, out, err = run(args, capsys)
    assert code == 0 and out == "" and err == ""
    assert len(api.real_writes("evict")) == 1  # --max-evictions 1
    assert len(api.of(EVENTS)) == sum(w[1] == "pods" or w[1] == "nodes" for w in api.real_writes())
    (lease,) = api.of(LEASES)
    assert lease["metadata"]["namespace"] == "ops"
    assert "holderIdentity" not in lease["spec"]  # released at the end of --once
    assert next(w[2] for w in api.real_writes() if w[1] == LEASES.plural) == "ops/gpuopt-controller"
    assert sum(obj["metadata"]["name"].startswith("gpuopt-hold-") for obj in api.of(PODS)) == 1


def test_another_holder_keeps_apply_from_acting(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.live.lease import LeaderLease

    assert LeaderLease(api, "other").tick()
    code, out, err = run(["controller", "--in-cluster", "--once", "--apply"], capsys)
    assert code == 0 and out == ""
    assert err == "gpuopt controller: nothing done: not the leader (held by other)\n"
    assert api.real_writes("evict", "patch") == []


def test_on_the_fake_server_through_a_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuopt.live.fake import FakeApiServer

    with FakeApiServer(objects=fragmented()) as server:
        config = str(server.write_kubeconfig(tmp_path / "config"))
        code, out, _ = run(["controller", "--kubeconfig", config, "--once"], capsys)
        assert code == 0 and len(out.splitlines()) == 6
        assert set(server.requests) == {"GET"}  # a client dry run only reads
        code, out, _ = run(["controller", "--kubeconfig", config, "--once", "--apply"], capsys)
        assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["done"] * 6
        evicted = {line.split()[3].split("/")[1] for line in out.splitlines() if " evict " in line}
        names = {p["metadata"]["name"] for p in server.objects(PODS)}
        assert len(evicted) == 2 and not evicted & names  # two of the four 4-GPU pods moved
        assert {f"gpuopt-hold-{name}" for name in evicted} <= names
        assert len(server.objects(EVENTS)) == 6
        (lease,) = server.objects(LEASES)
        assert "holderIdentity" not in lease["spec"]  # given up after --once


def test_the_loop_ends_on_sigterm_and_gives_the_lease_up(
    api: MemoryApi, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import signal
    import threading

    periods = threading.Event()
    original = api.list

    def counted(*args: object, **kwargs: object) -> object:
        if len(api.of(EVENTS)) > 0:  # a period has acted: ask the command to stop
            periods.set()
        return original(*args, **kwargs)  # type: ignore[arg-type]

    api.list = counted  # type: ignore[method-assign, assignment]
    before = signal.getsignal(signal.SIGTERM)

    def terminate() -> None:  # only while the command's handler is there (never pytest's)
        if periods.wait(30) and signal.getsignal(signal.SIGTERM) != before:
            os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Thread(target=terminate, daemon=True)
    timer.start()
    args = ["controller", "--in-cluster", "--apply", "--period", "0.1", "--identity", "ci"]
    code, out, err = run(args, capsys)
    timer.join(5)
    assert code == 0 and "done     evict" in out
    assert err.count("gpuopt controller: ") >= 1
    (lease,) = api.of(LEASES)
    assert "holderIdentity" not in lease["spec"]
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is given back


def test_holds_are_the_placeholders_gpuopt_calendar_emits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An applied ``holds`` period makes exactly the pods ``gpuopt calendar --emit kubernetes``
    prints for the objects the server holds (the calendar at the same clock), each with an
    Event; a client dry run before it writes nothing and prints them."""
    from functools import partial

    import yaml

    from gpuopt.live import controller as live
    from gpuopt.live.api import NODES, POD_GROUPS, PRIORITY_CLASSES
    from gpuopt.live.controller import HOLD
    from gpuopt.live.fake import FakeApiServer
    from tests.live.test_controller import NOW, big_job_waits

    monkeypatch.setattr(live, "Controller", partial(live.Controller, clock=lambda: NOW))
    with FakeApiServer(objects=big_job_waits()) as server:
        listed = [
            o for kind in (PRIORITY_CLASSES, POD_GROUPS, NODES, PODS) for o in server.objects(kind)
        ]
        (tmp_path / "cluster.json").write_text(json.dumps({"kind": "List", "items": listed}))
        code, out, _ = run(
            ["calendar", str(tmp_path / "cluster.json"), "--emit", "kubernetes", "--quiet",
             "--now", str(NOW)],
            capsys,
        )  # fmt: skip
        assert code == 0
        emitted = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Pod"]
        assert len(emitted) == 2  # node-0 and node-1, held for ml/big
        config = str(server.write_kubeconfig(tmp_path / "config"))
        command_line = ["controller", "--kubeconfig", config, "--once", "--questions", "holds"]
        code, out, err = run(command_line, capsys)
        assert code == 0 and set(server.requests) == {"GET"}  # a client dry run only reads
        assert [line.split()[:4] for line in out.splitlines()] == [
            ["would", "hold", "pod", f"ml/{pod['metadata']['name']}"] for pod in emitted
        ]
        assert "holds: the plan holds 2 placeholders; 0 kept, 2 to make, 0 to delete" in err
        code, out, _ = run([*command_line, "--apply", "--json"], capsys)
        assert code == 0
        actions = [json.loads(line) for line in out.splitlines()]
        assert [(a["verb"], a["outcome"], a["question"]) for a in actions] == [
            ("hold", "done", "holds")
        ] * 2
        made = {
            p["metadata"]["name"]: p
            for p in server.objects(PODS)
            if p["metadata"].get("labels", {}).get(HOLD) == "true"
        }
        for pod in emitted:
            stored = made.pop(pod["metadata"]["name"])
            for key in ("uid", "resourceVersion", "creationTimestamp"):  # the server's own
                del stored["metadata"][key]
            assert stored["metadata"]["labels"].pop(HOLD) == "true"  # the controller's marker
            assert stored == pod
        assert made == {}
        events = server.objects(EVENTS)
        assert sorted(e["regarding"]["name"] for e in events) == sorted(
            p["metadata"]["name"] for p in emitted
        )
        # the next period: nothing to make, nothing to delete
        code, out, err = run([*command_line, "--apply"], capsys)
        assert code == 0 and out == ""
        assert "0 actions (none); holds: the plan holds 2 placeholders; 2 kept" in err
