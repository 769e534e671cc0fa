"""Determinism: the same input and seed give the same grid, plan, placement and decision.

For every method of every problem (and the rolling and event-driven replays):
two runs in this process agree, and two fresh processes with different
``PYTHONHASHSEED`` values agree with this one, through the Python API
(``model_dump_json``) and through the CLI's ``--out`` files. Only the
measured ``seconds`` are left out of the comparison. The exact methods run
with a fixed seed and ``threads=1`` on instances they finish (status
``optimal``, asserted). ``ipc`` gives the same plan in one process, on a
local process pool and on a thread pool.

Instances come from :func:`gpuopt.legality.instance` (seeded by strings, so
the same in every process).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuopt.api import solve
from gpuopt.defrag.generator import TaskShares, random_snapshot
from gpuopt.defrag.greedy import solve_ipc
from gpuopt.legality import CASES, EXACT_CASES, instance, method_of
from gpuopt.planning.workload import generate_jobs
from gpuopt.simulate.jobs import ClusterNode, Policy, replay

ROOT = Path(__file__).resolve().parents[2]
#: Instances per case: small and medium shapes (see ``gpuopt.legality.instance(case, k).shape``);
#: defrag/heuristic #102 and #199 run their partitions on a local process pool.
NUMBERS: dict[str, tuple[int, ...]] = {
    "allocation/heuristic": (1, 2, 5, 11),
    "allocation/fifo": (0, 1, 3, 8),
    "allocation/cpsat": (4, 10, 12),
    "allocation/milp": (5, 6, 12),
    "allocation/lns": (1, 4),
    "allocation/models-heuristic": (4, 8, 9, 14),
    "allocation/models-fifo": (0, 2, 8, 11),
    "allocation/models-cpsat": (6, 9, 14),
    "allocation/models-milp": (5, 9, 11),
    "allocation/models-lns": (10, 13),
    "defrag/heuristic": (0, 7, 102, 199),
    "defrag/onehop": (4, 5, 7, 14),
    "defrag/milp": (0, 1, 8),
    "defrag/cpsat": (5, 6, 10),
    "topology/heuristic": (2, 6, 13, 14),
    "topology/milp": (3, 9, 13),
    "topology/cpsat": (0, 4, 5),
    "preemption/heuristic": (0, 7, 9, 11),
    "preemption/dp": (2, 5, 13),
    "preemption/milp": (1, 4, 6),
    "preemption/cpsat": (3, 4, 6),
    "gang/heuristic": (1, 2, 4, 5),
    "gang/cpsat": (3, 9, 13),
    "gang/milp": (0, 6, 9),
    "node/heuristic": (0, 3, 8, 12),
    "node/spread": (1, 4, 9),
    "rolling/heuristic": (1, 13),
}
#: The exact methods' instances finish in well under a second; a long limit keeps them
#: finishing (status optimal) on a busy machine, where a limit would make the answer vary.
EXACT_OPTIONS = {"time_limit": 120.0, "threads": 1}
HASH_SEEDS = ("0", "4294967295")


def canonical(output: Any) -> Any:
    """An output as plain data without its measured time."""
    data = json.loads(output if isinstance(output, str) else output.model_dump_json())
    data.pop("seconds", None)
    return data


def run_case(case: str, number: int) -> Any:
    """The output of instance ``number`` of ``case`` as plain data (status checked)."""
    built = instance(case, number)
    family, method = method_of(case)
    options = dict(built.options)
    if case in EXACT_CASES:
        options.update(EXACT_OPTIONS)
    if family == "rolling":
        from gpuopt.planning.rolling import rolling_replay

        return canonical(rolling_replay(built.problem, method=method, **options).rolling)
    output = canonical(solve(built.problem, method, **options))
    if case in EXACT_CASES:
        assert output["status"] == "optimal", (case, number, output["status"])
    return output


@functools.cache
def first_run(case: str, number: int) -> str:
    """The first output of an instance in this process (shared by the tests below)."""
    return json.dumps(run_case(case, number), sort_keys=True)


def run_replays() -> list[dict[str, Any]]:
    """The event-driven replay under three policies (random victims are seeded)."""
    nodes = [ClusterNode(f"n{i}", 8, 96.0, "nvswitch8" if i % 2 else "pcie8") for i in range(12)]
    jobs = generate_jobs(5, nodes, jobs=150, load=1.1)
    from gpuopt.planning.workload import bandwidths

    out = []
    for policy in (
        Policy("cost"),
        Policy("random", victims="random", seed=3),
        Policy("spread", placement="spread", topology=False),
    ):
        metrics = replay(nodes, jobs, policy, bandwidth=bandwidths()).as_dict()
        metrics.pop("seconds")
        out.append(metrics)
    return out


def everything() -> dict[str, Any]:
    """Every case's outputs and the replays (what a child process prints)."""
    out: dict[str, Any] = {
        f"{case}#{number}": json.loads(first_run(case, number))
        for case in CASES
        for number in NUMBERS[case]
    }
    out["replay"] = run_replays()
    return out


def child_env(hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_children(code: str, *args: str) -> list[str]:
    """Run ``code`` in one fresh process per hash seed, at once; return their stdouts."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            env=child_env(seed),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in HASH_SEEDS
    ]
    outputs = []
    for child in children:
        stdout, stderr = child.communicate(timeout=600)
        assert child.returncode == 0, stderr[-2000:]
        outputs.append(stdout)
    return outputs


# --------------------------------------------------------------------------- in-process
@pytest.mark.parametrize("case", CASES)
def test_same_output_twice_in_one_process(case: str) -> None:
    for number in NUMBERS[case]:
        assert json.loads(first_run(case, number)) == run_case(case, number), (case, number)


def test_replay_twice_in_one_process() -> None:
    assert run_replays() == run_replays()


def test_ipc_same_plan_in_process_on_processes_and_on_threads() -> None:
    snapshot = random_snapshot(3, nodes=400, fill=0.5, shares=TaskShares(group_fraction=0.3))
    options = {"partition_size": 60, "rounds": 3, "seed": 11}
    alone = solve_ipc(snapshot, workers=1, **options)
    assert alone.metrics.emptied > 0
    pooled = solve_ipc(snapshot, workers=2, **options)
    with ThreadPoolExecutor(max_workers=4) as threads:
        threaded = solve_ipc(snapshot, executor=threads, **options)
    assert canonical(pooled) == canonical(alone)
    assert canonical(threaded) == canonical(alone)


# --------------------------------------------------------------------------- across processes
CHILD_API = """
import json
from tests.contracts.test_determinism import everything
print(json.dumps(everything(), sort_keys=True))
"""


def test_same_outputs_across_processes_and_hash_seeds() -> None:
    here = json.loads(json.dumps(everything(), sort_keys=True))
    for stdout in run_children(CHILD_API):
        there = json.loads(stdout.strip().splitlines()[-1])
        assert there.keys() == here.keys()
        for key in here:
            assert there[key] == here[key], key


CHILD_CLI = """
import sys
from pathlib import Path
from gpuopt.cli import main
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir()
for line in (folder / "commands.txt").read_text().splitlines():
    name, *argv = line.split()
    code = main([*argv, "--out", str(out / f"{name}.json"), "--quiet"])
    assert code == 0, (line, code)
"""

#: (name, case and instance number, command, method, extra flags)
CLI_RUNS: list[tuple[str, str, int, str, str, list[str]]] = [
    ("allocate-greedy", "allocation/greedy", 1, "allocate", "greedy", []),
    ("allocate-fifo", "allocation/fifo", 1, "allocate", "fifo", []),
    ("allocate-cpsat", "allocation/cpsat", 4, "allocate", "cpsat", ["--threads", "1"]),
    ("allocate-milp", "allocation/milp", 6, "allocate", "milp", ["--threads", "1"]),
    ("defrag-ipc", "defrag/ipc", 0, "defrag", "ipc", ["--workers", "2", "--partition-size", "8"]),
    ("defrag-onehop", "defrag/onehop", 5, "defrag", "onehop", []),
    ("defrag-milp", "defrag/milp", 1, "defrag", "milp", ["--threads", "1"]),
    ("defrag-cpsat", "defrag/cpsat", 5, "defrag", "cpsat", ["--threads", "1"]),
    ("topology-greedy", "topology/greedy", 13, "topology", "greedy", []),
    ("topology-milp", "topology/milp", 3, "topology", "milp", []),
    ("preempt-heuristic", "preemption/heuristic", 7, "preempt", "heuristic", []),
    ("preempt-exact", "preemption/exact", 13, "preempt", "exact", []),
]


def test_same_cli_outputs_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    commands = []
    for name, case, number, command, method, extra in CLI_RUNS:
        path = tmp_path / f"{name}-input.json"
        path.write_text(instance(case, number).problem.to_json())
        exact = case in EXACT_CASES
        flags = [*extra, "--seed", "0"] if exact and command != "topology" else extra
        if exact:
            flags = [*flags, "--time-limit", "120"]
        commands.append(" ".join([name, command, str(path), "--method", method, *flags]))
    (tmp_path / "commands.txt").write_text("\n".join(commands) + "\n")
    children = []
    for number, seed in enumerate(HASH_SEEDS):
        out = tmp_path / f"out-{number}"
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD_CLI, str(tmp_path), str(out)],
                cwd=ROOT,
                env=child_env(seed),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for child in children:
        _, stderr = child.communicate(timeout=600)
        assert child.returncode == 0, stderr[-2000:]
    for name, case, *_ in CLI_RUNS:
        first, second = (
            canonical((tmp_path / f"out-{n}" / f"{name}.json").read_text()) for n in (0, 1)
        )
        assert first == second, name
        if case in EXACT_CASES:
            assert first["status"] == "optimal", name
