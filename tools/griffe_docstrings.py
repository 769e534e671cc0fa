"""Griffe extension for the API reference: doctest blocks as code, roles as code spans.

gpuopt's docstrings put short doctests in the description (STYLE.md 7), outside
a numpy ``Examples`` section. Markdown would read those ``>>>`` lines as nested
block quotes and ``[0, 0, 1]`` outputs as reference links (a warning under
``mkdocs build --strict``), so this extension wraps every such block (from a
``>>>`` line to the next blank line) in a ``pycon`` code fence. It changes only
what the documentation renders: pytest still runs the doctests from the source.
``Examples`` sections are left to the numpy parser, which already reads them as
code. Sphinx roles (``:func:`violations```, ``:class:`~gpuopt.errors.ProblemError```)
become plain code spans (``violations``, ``ProblemError``) instead of showing
the role's markup.

A function whose options are one object (``@KEYWORDS.signature`` of
:class:`gpuopt.options.Keywords`, written ``f(problem, options=None,
**settings)``) is shown with the keywords it takes: its runtime signature
(``inspect.signature``, which the decorator sets) in place of the
``**settings`` the source shows, after its ``options``, and its runtime
docstring, whose Parameters entries for those keywords the decorator wrote
from the options object's field descriptions (the source has only the rest).

Loaded by ``mkdocs.yml`` (mkdocstrings handler option ``extensions``).
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

FENCE = "```"
DOCTEST_FLAG = re.compile(r"\s*#\s*doctest:.*$")
DASHES = re.compile(r"^\s*-{3,}\s*$")
ROLE = re.compile(r":(?:py:)?(?:func|class|data|meth|attr|mod|exc|obj|const):`(~?)([^`]+)`")


def plain_roles(line: str) -> str:
    """Turn Sphinx cross-reference roles into code spans (``~`` keeps the last name).

    >>> plain_roles("see :func:`evaluate` and :class:`~gpuopt.errors.ProblemError`")
    'see `evaluate` and `ProblemError`'
    """
    return ROLE.sub(
        lambda match: f"`{match[2].rsplit('.', 1)[-1] if match[1] else match[2]}`", line
    )


def fence_doctests(text: str) -> str:
    """Fence the doctest blocks of ``text`` outside ``Examples`` and plain its roles.

    >>> fence_doctests("Sum.\\n\\n>>> 1 + 1\\n2").splitlines()
    ['Sum.', '', '```pycon', '>>> 1 + 1', '2', '```']
    """
    lines = text.split("\n")
    out: list[str] = []
    section = ""
    in_fence = False
    in_doctest = False
    indent = ""
    for position, line in enumerate(lines):
        stripped = line.strip()
        following = lines[position + 1] if position + 1 < len(lines) else ""
        if in_doctest and not stripped:
            out.append(indent + FENCE)
            in_doctest = False
        if not in_doctest and not in_fence and stripped and DASHES.match(following):
            section = stripped.lower()  # a numpy section header: its title over a dashed line
        if stripped.startswith(FENCE) and not in_doctest:
            in_fence = not in_fence
        elif (
            not in_fence
            and not in_doctest
            and section != "examples"
            and (stripped == ">>>" or stripped.startswith(">>> "))
        ):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + FENCE + "pycon")
            in_doctest = True
        if in_doctest:
            out.append(DOCTEST_FLAG.sub("", line))
        else:
            out.append(line if in_fence else plain_roles(line))
    if in_doctest:
        out.append(indent + FENCE)
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the free-standing doctests and plain the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring text in place (the source is untouched)."""
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def runtime_function(module: str, name: str) -> Any:
    """``module.name`` as Python imports it (None if it cannot be imported)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def runtime_docstring(module: str, name: str) -> str | None:
    """The docstring of ``module.name`` as Python reports it, dedented (None if none).

    >>> "time_limit" in runtime_docstring("gpuopt.gang.milp", "solve_milp")
    True
    """
    return inspect.getdoc(runtime_function(module, name))


def runtime_parameters(module: str, name: str) -> griffe.Parameters | None:
    """The parameters of ``module.name`` as Python reports them (None if it cannot be read).

    >>> [p.name for p in runtime_parameters("gpuopt.gang.milp", "solve_milp")]
    ['problem', 'time_limit', 'seed', 'threads', 'log']
    """
    try:
        signature = inspect.signature(runtime_function(module, name))
    except (TypeError, ValueError):
        return None
    return griffe.Parameters(
        *(
            griffe.Parameter(
                parameter.name,
                annotation=None
                if parameter.annotation is inspect.Parameter.empty
                else str(parameter.annotation),
                kind=_KINDS[parameter.kind],
                default=None
                if parameter.default is inspect.Parameter.empty
                else repr(parameter.default),
            )
            for parameter in signature.parameters.values()
        )
    )


class KeywordSignatures(griffe.Extension):
    """Show a function decorated with a ``Keywords`` object's ``signature`` with its
    ``options`` object and, in place of ``**settings``, the keywords it takes, and with
    the docstring that documents them."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        """Replace ``func``'s parameters and docstring by its runtime ones when it is so
        decorated (the docstring fenced and with its roles plain, as :class:`DoctestBlocks`
        does, which has run before)."""
        decorated = any(str(d.value).endswith(".signature") for d in func.decorators)
        if not decorated or func.parent is None or not func.parent.is_module:
            return
        found = runtime_parameters(func.parent.path, func.name)
        if found is None:
            return
        # the source's own parameters (the problem, ``options``) but ``**settings``, then
        # the keywords the decorator shows in their place
        own = [p for p in func.parameters if p.kind is not griffe.ParameterKind.var_keyword]
        names = {p.name for p in own}
        func.parameters = griffe.Parameters(*own, *(p for p in found if p.name not in names))
        doc = runtime_docstring(func.parent.path, func.name)
        if doc is not None and func.docstring is not None:
            func.docstring.value = fence_doctests(doc)
