"""The API reference's griffe extension (tools/griffe_docstrings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe")

EXTENSION = Path(__file__).resolve().parents[2] / "tools" / "griffe_docstrings.py"


def test_a_function_taking_an_options_object_shows_its_keywords() -> None:
    # gang.milp.solve_milp is written (problem, options=None, **settings) and takes the
    # four run settings of SOLVER_KEYWORDS as keywords; its docstring documents them
    module = griffe.load(
        "gpuopt.gang.milp", extensions=griffe.load_extensions(str(EXTENSION)), resolve_aliases=False
    )
    function = module["solve_milp"]
    assert [p.name for p in function.parameters] == [
        "problem",
        "options",
        "time_limit",
        "seed",
        "threads",
        "log",
    ]
    assert function.parameters["threads"].default == "1"


def test_a_function_without_the_decorator_keeps_its_source_signature() -> None:
    # gpuopt.solve takes **options too, but they are the methods' keywords: left as written
    module = griffe.load(
        "gpuopt.api", extensions=griffe.load_extensions(str(EXTENSION)), resolve_aliases=False
    )
    last = list(module["solve"].parameters)[-1]
    assert (last.name, last.kind) == ("options", griffe.ParameterKind.var_keyword)


def test_the_api_page_documents_the_keywords_the_decorator_wrote() -> None:
    # allocation.milp.solve_milp's source documents no option: the decorator writes each
    # from AllocationExactOptions's Attributes, and the page must show them as parameters
    module = griffe.load(
        "gpuopt.allocation.milp",
        extensions=griffe.load_extensions(str(EXTENSION)),
        resolve_aliases=False,
    )
    function = module["solve_milp"]
    sections = function.docstring.parse("numpy")
    documented = {
        item.name: item.description
        for section in sections
        if section.kind is griffe.DocstringSectionKind.parameters
        for item in section.value
    }
    shown = [p.name for p in function.parameters if p.name != "problem"]
    assert shown == list(documented)  # every keyword, in the signature's order
    assert documented["solver"].startswith("The MILP's solver: one of `SOLVERS`")  # roles plain
    assert "Returns" in function.docstring.value  # its own sections stay
