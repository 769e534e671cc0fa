"""Every option is declared once (gpuopt.options) and read the same way everywhere."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from gpuopt.allocation.cpsat import solve_cpsat as allocation_cpsat
from gpuopt.allocation.milp import solve_milp as allocation_milp
from gpuopt.allocation.patterns import AllocationExactOptions
from gpuopt.allocation.problem import AllocationProblem
from gpuopt.api import METHODS, OPTION_RULES, solve
from gpuopt.cluster.items import ClusterOptions
from gpuopt.cluster.model import Cluster
from gpuopt.defrag.cpsat import solve_cpsat as defrag_cpsat
from gpuopt.defrag.generator import random_snapshot
from gpuopt.defrag.greedy import IpcOptions, solve_ipc
from gpuopt.defrag.milp import DefragExactOptions
from gpuopt.defrag.milp import solve_milp as defrag_milp
from gpuopt.errors import ProblemError
from gpuopt.options import MAX_SECONDS, OPTIONS, Keywords, check_option, field_descriptions
from gpuopt.readers.kubectl import KubectlOptions, read_kubernetes
from gpuopt.readers.openb import OpenbOptions, read_openb

#: What solve handles itself, not a method's option.
NOT_OPTIONS = {"problem", "initial"}


def test_every_method_option_is_declared() -> None:
    undeclared = sorted(
        f"{problem_type.__name__}.{method}: {name}"
        for problem_type, table in METHODS.items()
        for method, function in table.items()
        for name in inspect.signature(function).parameters
        if name not in OPTIONS and name not in NOT_OPTIONS
    )
    assert undeclared == []


def test_solve_checks_what_the_declarations_say() -> None:
    assert set(OPTION_RULES) == set(OPTIONS)
    for name, (accept, what) in OPTION_RULES.items():
        assert what == OPTIONS[name].what
        assert accept is OPTIONS[name].accepts or accept == OPTIONS[name].accepts


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("time_limit", [1e-3, 10, MAX_SECONDS], [0, -1, MAX_SECONDS * 2, float("nan"), True, "5"]),
        ("seed", [0, 2**31 - 1], [-1, 2**31, 1.5, True]),
        ("depth", [1, 6], [0, 7]),
        ("threads", [1, 256], [0, 257]),
        ("guide", [True, False, "mip"], [1, 0, "lp"]),
        ("exact", ["milp", "cpsat"], ["exact", 1]),
        ("improve", [True, False], [1, "yes"]),
    ],
)
def test_bounds_by_hand(name: str, good: list[object], bad: list[object]) -> None:
    option = OPTIONS[name]
    assert [value for value in good if not option.accepts(value)] == []
    assert [value for value in bad if option.accepts(value)] == []


def test_one_sentence_naming_the_option() -> None:
    assert check_option("depth", 7) == "depth must be an integer from 1 to 6 (got 7)."
    assert check_option("depth", None) is None  # the method's default
    assert check_option("not_an_option", object()) is None


def test_solve_refuses_with_the_declared_sentence(tiny: object) -> None:
    with pytest.raises(ProblemError, match=r"^seed must be an integer from 0 to 2,147,483,647"):
        solve(tiny, "greedy", seed=-1)  # type: ignore[call-overload]


@pytest.mark.parametrize("name", ["partition_size", "depth", "rounds", "time_limit", "seed"])
def test_snapshot_options_take_the_declared_bounds(name: str) -> None:
    option = OPTIONS[name]
    field = ClusterOptions.model_fields[name]
    bounds = {
        type(item).__name__: getattr(item, type(item).__name__.lower()) for item in field.metadata
    }
    if option.kind == "seconds":
        assert bounds == {"Gt": 0, "Le": option.high}
    else:
        assert bounds == {"Ge": option.low, "Le": option.high}
    assert field.description == option.help


def test_snapshot_accepts_a_year_of_seconds_as_solve_does() -> None:
    assert ClusterOptions(time_limit=MAX_SECONDS).time_limit == MAX_SECONDS
    with pytest.raises(ValueError, match="time_limit"):
        ClusterOptions(time_limit=MAX_SECONDS + 1)


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (["--depth", "7"], "expected an integer from 1 to 6, got '7'"),
        (["--time-limit", "inf"], "expected a number of seconds in (0, 31,536,000]"),
        (["--max-moves", "-1"], "expected an integer from 0 to 2,000,000, got '-1'"),
    ],
)
def test_flags_take_the_declared_bounds(flags: list[str], sentence: str, tmp_path: object) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "gpuopt.cli", "defrag", "missing.json", *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert sentence in run.stderr
    assert "Traceback" not in run.stderr


# --------------------------------------------------------------- options as one object
def _cluster() -> Cluster:
    """Three 8-GPU nodes: a and c hold 6 GPUs each, b two 2-GPU tasks. No 6-GPU task fits
    elsewhere (4 and 2 GPUs free), so only b empties, and that takes two moves."""
    return Cluster(
        nodes=[{"id": n, "gpus": 8, "cpus": 64} for n in ("a", "b", "c")],
        tasks=[
            {"id": "t1", "node": "a", "gpus": 6},
            {"id": "t2", "node": "b", "gpus": 2},
            {"id": "t3", "node": "b", "gpus": 2},
            {"id": "t4", "node": "c", "gpus": 6},
        ],
    )


def test_ipc_takes_its_settings_as_one_object_or_as_keywords() -> None:
    problem = random_snapshot(4, nodes=40)
    free = solve_ipc(problem, seed=5)
    assert len(free.moves) > 1  # so a budget of one move is a real limit
    by_keywords = solve_ipc(problem, max_moves=1, seed=5)
    by_object = solve_ipc(problem, IpcOptions(max_moves=1, seed=5))
    assert len(by_object.moves) == 1
    assert by_object.moves == by_keywords.moves
    named = solve_ipc(problem=problem, options=IpcOptions(max_moves=1, seed=5))
    assert named.moves == by_keywords.moves
    # a keyword given as well overrides the object's field: None is the snapshot's (no budget)
    assert solve_ipc(problem, IpcOptions(max_moves=1, seed=5), max_moves=None).moves == free.moves


@pytest.mark.parametrize("solver", [defrag_milp, defrag_cpsat])
def test_defrag_exact_takes_one_options_object(solver: Any) -> None:
    # b empties with two moves (one 2-GPU task to a, one to c); one move empties nothing
    unbounded = solver(_cluster(), DefragExactOptions(threads=1, time_limit=20.0))
    assert (unbounded.metrics.emptied, len(unbounded.moves)) == (1, 2)
    capped = solver(_cluster(), DefragExactOptions(threads=1, time_limit=20.0, max_moves=1))
    assert capped.metrics.emptied == 0
    assert capped.moves == solver(_cluster(), threads=1, time_limit=20.0, max_moves=1).moves


def test_allocation_exact_takes_one_options_object(tiny: AllocationProblem) -> None:
    cold = allocation_milp(tiny, AllocationExactOptions(warm=False, time_limit=20.0))
    warm = allocation_milp(tiny, time_limit=20.0)
    assert cold.status == warm.status == "optimal"
    assert cold.objective == pytest.approx(warm.objective)
    assert allocation_cpsat(tiny, AllocationExactOptions(threads=1)).objective == pytest.approx(
        warm.objective
    )


def test_signatures_show_each_backends_own_keywords_and_defaults() -> None:
    milp, cpsat = inspect.signature(defrag_milp), inspect.signature(defrag_cpsat)
    assert (milp.parameters["threads"].default, cpsat.parameters["threads"].default) == (1, 2)
    assert "progress" in milp.parameters and "progress" not in cpsat.parameters
    assert "solver" in inspect.signature(allocation_milp).parameters
    assert "solver" not in inspect.signature(allocation_cpsat).parameters
    assert list(inspect.signature(solve_ipc).parameters)[:3] == [
        "problem",
        "partition_size",
        "depth",
    ]
    kubectl = inspect.signature(read_kubernetes).parameters
    assert kubectl["sources"].kind is inspect.Parameter.VAR_POSITIONAL
    assert kubectl["hp_priority"].default == KubectlOptions().hp_priority


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: solve_ipc(_cluster(), dept=2), "dept"),
        (lambda: defrag_cpsat(_cluster(), progress=print), "progress"),  # HiGHS only
        (lambda: defrag_milp(_cluster(), partition_size=10), "partition_size"),
        (lambda: allocation_cpsat(_cluster(), solver="highs"), "solver"),  # type: ignore[arg-type]
        (lambda: read_kubernetes({"kind": "List", "items": []}, stric=True), "stric"),
        (lambda: read_openb("missing-nodes.csv", "missing-pods.csv", polcy="spread"), "polcy"),
    ],
)
def test_a_keyword_a_function_does_not_take_is_named(call: Any, name: str) -> None:
    with pytest.raises(TypeError, match=rf"^unexpected keyword argument '{name}' \(the options: "):
        call()


def test_options_of_another_kind_are_refused() -> None:
    with pytest.raises(
        TypeError, match=r"^options must be a DefragExactOptions \(got IpcOptions\)"
    ):
        defrag_milp(_cluster(), IpcOptions())  # type: ignore[arg-type]


def test_exact_methods_take_a_spent_time_limit_as_before() -> None:
    # solve() refuses 0 s (OPTIONS), but milp hands ipc what is left of its deadline, 0 when
    # spent: the start comes back with status time_limit, not an error
    for solver in (defrag_milp, defrag_cpsat):
        plan = solver(random_snapshot(2, nodes=30), time_limit=1e-9)
        assert plan.status == "time_limit"
    assert solve_ipc(_cluster(), time_limit=0.0).status == "time_limit"
    with pytest.raises(ProblemError, match=r"^time_limit must be a number of seconds"):
        solve(_cluster(), "ipc", time_limit=0.0)


def test_reader_options_are_checked_when_made() -> None:
    with pytest.raises(ProblemError, match=r"^policy: expected 'spread', 'binpack' or 'random'"):
        OpenbOptions(policy="first-fit")  # type: ignore[arg-type]
    assert OpenbOptions(lock_qos="LS").lock_qos == frozenset({"LS"})  # one class, not letters
    with pytest.raises(ProblemError, match=r"^topology label 'node'"):
        KubectlOptions(topology_labels=["node"])
    data = {
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1", "labels": {"example.com/rack": "r1"}},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"}},
            }
        ],
    }
    racks = KubectlOptions(topology_labels=["rack=example.com/rack"], name="one")
    cluster, _ = read_kubernetes(data, options=racks)
    assert (cluster.name, cluster.nodes[0].topology) == ("one", {"rack": "r1"})
    renamed, _ = read_kubernetes(data, options=racks, name="two")
    assert (renamed.name, renamed.nodes[0].topology) == ("two", {"rack": "r1"})


# --- each option's meaning written once, in its options object's Attributes ---------


def _decorated() -> list[Any]:
    """Every function of gpuopt decorated with a Keywords object's ``signature`` (found
    in the source, so a new one is covered without being listed here)."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "gpuopt"
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Attribute) and d.attr == "signature" for d in node.decorator_list
            ):
                found.append(getattr(importlib.import_module(module), node.name))
    return found


def _documented(doc: str) -> dict[str, str]:
    """name -> the text of its entry in ``doc``'s Parameters section (one line per entry)."""
    lines = inspect.cleandoc(doc).split("\n")
    start = lines.index("Parameters")
    entries: dict[str, str] = {}
    names: list[str] = []
    for line, following in zip(lines[start + 2 :], [*lines[start + 3 :], ""], strict=True):
        if following.startswith("---"):
            break  # the next section's title
        if line and not line.startswith(" "):
            names = [name.strip().lstrip("*") for name in line.split(",")]
            entries.update(dict.fromkeys(names, ""))
        elif line.strip():
            for name in names:
                entries[name] = (entries[name] + " " + line.strip()).strip()
    return entries


DECORATED = _decorated()


def test_the_scan_finds_every_backend_with_options() -> None:
    # by hand: allocation (greedy_grid, solve_greedy, milp, cpsat), defrag (ipc, milp,
    # cpsat), gang (milp, cpsat), switch placement (milp, cpsat), preemption (milp,
    # cpsat), the calendar (milp, cpsat) and the two readers (kubectl, openb)
    assert len(DECORATED) == 17
    assert allocation_milp in DECORATED and read_openb in DECORATED


@pytest.mark.parametrize("function", DECORATED, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_help_documents_every_keyword(function: Any) -> None:
    takes = [name for name in inspect.signature(function).parameters if name != "problem"]
    entries = _documented(function.__doc__)
    assert set(takes) <= set(entries), f"undocumented: {set(takes) - set(entries)}"
    assert all(entries[name] for name in takes)


def test_help_shows_the_options_meaning_for_each_backend() -> None:
    # the texts of AllocationExactOptions's Attributes, as written there
    import pydoc

    shown = " ".join(pydoc.render_doc(allocation_milp, renderer=pydoc.plaintext).split())
    for text in (
        "HiGHS threads, or CP-SAT's number of workers.",
        "A Pyomo model from :func:`~gpuopt.allocation.milp.build_milp`",
        "The settings below as one :class:`~gpuopt.allocation.patterns.AllocationExactOptions`",
        "Without a bound (the solver could not start in time",  # its own Returns stays
    ):
        assert text in shown
    entries = _documented(allocation_cpsat.__doc__)
    assert entries["initial"] == "A starting grid or result (default: the greedy's grid)."
    assert "solver" not in entries and "model" not in entries  # not cpsat's keywords


#: Backends whose source docstrings still write out options their object describes:
#: gpuopt/preemption is being rewritten elsewhere (its entries are kept as written).
HAND_WRITTEN = {"gpuopt.preemption.milp.solve_milp"}


@pytest.mark.parametrize("function", DECORATED, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_no_backend_repeats_an_option_its_object_describes(function: Any) -> None:
    import ast

    name = f"{function.__module__}.{function.__name__}"
    source = ast.get_docstring(ast.parse(inspect.getsource(function)).body[0]) or ""  # type: ignore[arg-type]
    if "\nParameters\n" not in f"\n{source}\n" or name in HAND_WRITTEN:
        return
    described = set(field_descriptions(_options_kind(function)))
    if described:  # else (the readers) the function's own entries are the one place
        assert not (described | {"options"}) & set(_documented(source)), name


def _options_kind(function: Any) -> type:
    """The options class ``function`` takes (its ``options`` parameter's annotation)."""
    annotation = inspect.get_annotations(function, eval_str=True)["options"]
    return next(arg for arg in annotation.__args__ if arg is not type(None))


@dataclass(frozen=True, kw_only=True)
class _Base:
    """A base run.

    Attributes
    ----------
    seed, threads
        Seed and threads.
    log
        Show the log.
    """

    seed: int = 0
    threads: int = 1
    log: bool = False


@dataclass(frozen=True, kw_only=True)
class _Own(_Base):
    """Its own run.

    Attributes
    ----------
    log
        Show the solver's log on stderr.
    limit
        Seconds.
    """

    limit: float = 1.0
    quiet: bool = True  # described nowhere


def test_a_subclass_entry_replaces_its_bases() -> None:
    assert field_descriptions(_Own) == {
        "seed": "Seed and threads.",
        "threads": "Seed and threads.",
        "log": "Show the solver's log on stderr.",
        "limit": "Seconds.",
    }


def test_document_writes_what_the_docstring_lacks_and_keeps_what_it_has() -> None:
    doc = """Solve.

    Parameters
    ----------
    problem
        The problem.
    threads
        Our own meaning.

    Returns
    -------
    int
    """
    written = Keywords.of(_Own, omit=("limit",)).document(doc)
    assert written.split("\n") == [
        "Solve.",
        "",
        "Parameters",
        "----------",
        "problem",
        "    The problem.",
        "threads",
        "    Our own meaning.",  # kept as written, not written twice
        "options",
        "    The settings below as one :class:`~tests.test_options._Own`",
        "    (keywords given as well override its fields).",
        "seed",  # the group's other name only
        "    Seed and threads.",
        "log",
        "    Show the solver's log on stderr.",
        "",
        "Returns",
        "-------",
        "int",
    ]  # limit is omitted, quiet described nowhere: no entry


def test_document_adds_a_parameters_section_and_is_stable() -> None:
    keywords = Keywords.of(_Base)
    once = keywords.document("Solve.\n\nMore words.")
    assert once.endswith(
        "More words.\n\nParameters\n----------\noptions\n"
        "    The settings below as one :class:`~tests.test_options._Base`\n"
        "    (keywords given as well override its fields).\n"
        "seed, threads\n    Seed and threads.\nlog\n    Show the log."
    )
    assert keywords.document(once) == once  # documenting twice adds nothing
    assert keywords.document(once, takes_options=False) == once
    assert "options" not in keywords.document("Solve.", takes_options=False)
