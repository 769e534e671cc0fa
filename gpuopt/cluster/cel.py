"""CEL device selectors of Dynamic Resource Allocation, evaluated as Kubernetes does.

A DeviceClass, a claim's request and a DeviceTaintRule select devices with CEL
expressions over one variable, ``device`` (``driver``, ``attributes``,
``capacity``, ``allowMultipleAllocations``). :class:`DeviceCel` compiles each
expression once and evaluates it on a device, with the answer ``True``,
``False`` or ``None`` (it could not be evaluated: the library is not installed,
the expression does not parse, or it failed on this device, as Kubernetes'
does on a missing attribute); a ``None`` is reported by the caller and never
taken for an answer (``models/cluster.md``, R5).

The library is ``common-expression-language`` (the ``cel`` module, the Rust
``cel`` crate behind a Python binding; extra ``dra``); ``docs/kubernetes.md``
says why. Selectors of the common form (:func:`plain_selector`: the driver and
attributes equal to literals, ``allowMultipleAllocations``) are answered here where
the answer is certain, with or without the library. Kubernetes adds two libraries to
standard CEL that DRA selectors use, and they are provided here as functions:

* quantities: ``quantity("40Gi")``, ``isQuantity``, and the methods
  ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``, ``sub``,
  ``sign``, ``isInteger``, ``asInteger``, ``asApproximateFloat``;
* semantic versions: ``semver("1.2.3")``, ``isSemver``, ``major``, ``minor``,
  ``patch`` and the same comparisons.

A quantity is carried as a one-entry map ``{"__quantity__": text}`` and a
version as ``{"__semver__": text}``, so that comparing two of them goes through
these functions (the library hands a method's receiver in as its first
argument). A device's capacities are quantities and its ``version``
attributes versions, as in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from gpuopt.errors import short

#: The key of a quantity's map and of a version's map inside an evaluation.
QUANTITY_KEY = "__quantity__"
SEMVER_KEY = "__semver__"
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
)
#: Expressions remembered per evaluator (a cluster has a few dozen at most).
_MAX_PROGRAMS = 10_000


class CelError(Exception):
    """An expression that cannot be evaluated (said in one sentence)."""


def available() -> bool:
    """Whether the CEL library (extra ``dra``) is installed."""
    try:
        import cel  # noqa: F401
    except ImportError:
        return False
    return True


def quantity(text: str) -> dict[str, str]:
    """``quantity(text)``: a Kubernetes quantity (refused when ``text`` is not one)."""
    _amount(text)
    return {QUANTITY_KEY: text}


def _amount(value: Any) -> Fraction:
    """The exact amount of a quantity (its map, or its text)."""
    from gpuopt.cluster.quantity import parse_quantity

    text = value.get(QUANTITY_KEY) if isinstance(value, Mapping) else value
    if not isinstance(text, str):
        raise CelError(f"{short(value)} is not a quantity")
    try:
        return parse_quantity(text)
    except Exception:
        raise CelError(f"{short(text)} is not a quantity") from None


def _version(value: Any) -> tuple[int, int, int]:
    """(major, minor, patch) of a version (its map, or its text)."""
    text = value.get(SEMVER_KEY) if isinstance(value, Mapping) else value
    found = _SEMVER.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise CelError(f"{short(value)} is not a semantic version")
    return int(found[1]), int(found[2]), int(found[3])


def _order(left: Any, right: Any) -> int:
    """-1, 0 or 1: two quantities or two versions compared."""
    if isinstance(left, Mapping) and SEMVER_KEY in left:
        a: Any = _version(left)
        b: Any = _version(right)
    else:
        a, b = _amount(left), _amount(right)
    return int(a > b) - int(a < b)


def _fraction_text(value: Fraction) -> str:
    """A quantity's text for an exact amount (milli-units where it is not whole)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator != 1:
        raise CelError(f"{float(value)} cannot be written as a quantity")
    return f"{milli.numerator}m"


def _semver(text: str) -> dict[str, str]:
    _version(text)
    return {SEMVER_KEY: text}


def _test_of(parse: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """CEL's ``isX(text)`` for the parser ``parse`` of ``X``: whether it reads ``text``."""

    def test(text: Any) -> bool:
        try:
            parse(text)
        except CelError:
            return False
        return True

    return test


_is_quantity = _test_of(_amount)
_is_semver = _test_of(_version)


#: The Kubernetes CEL extensions DRA selectors use, by name.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _order,
    "isGreaterThan": lambda left, right: _order(left, right) > 0,
    "isLessThan": lambda left, right: _order(left, right) < 0,
    "sign": lambda value: (_amount(value) > 0) - (_amount(value) < 0),
    "isInteger": lambda value: _amount(value).denominator == 1,
    "asInteger": lambda value: int(_amount(value)),
    "asApproximateFloat": lambda value: float(_amount(value)),
    "add": lambda left, right: {QUANTITY_KEY: _fraction_text(_amount(left) + _amount(right))},
    "sub": lambda left, right: {QUANTITY_KEY: _fraction_text(_amount(left) - _amount(right))},
    "major": lambda value: _version(value)[0],
    "minor": lambda value: _version(value)[1],
    "patch": lambda value: _version(value)[2],
}


_LITERAL = r"""'[^'\\\n\r]*'|"[^"\\\n\r]*"|-?\d{1,18}|true|false"""
_ATOM = re.compile(
    rf"""\s*(?:(?P<multiple>!?)\s*device\.allowMultipleAllocations"""
    rf"""|device\.driver\s*==\s*(?P<driver>{_LITERAL})"""
    rf"""|device\.attributes\[\s*(?P<domain>'[^'\\\n\r]*'|"[^"\\\n\r]*")\s*\]\.(?P<name>[A-Za-z_]\w*)"""
    rf"""\s*==\s*(?P<value>{_LITERAL}))\s*(?:&&|$)"""
)


def _literal(text: str) -> str | int | bool:
    """A CEL literal of :data:`_LITERAL`: a string without escapes or line breaks, an int of
    at most 18 digits (within CEL's 64 bits), a bool."""
    if text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def plain_selector(expression: str) -> list[tuple[str, Any, Any]] | None:
    """The atoms of a selector of the common form, or None for any other expression: a
    conjunction (``&&``) of ``device.driver == 'x'``,
    ``device.attributes['domain'].name == <literal>`` (a string without escapes, an int,
    ``true`` or ``false``) and ``device.allowMultipleAllocations`` or its negation. Each atom
    is ``("driver", value, None)``, ``("attribute", (domain, name), value)`` or
    ``("multiple", wanted, None)``.

    >>> plain_selector("device.driver == 'gpu.nvidia.com' && "
    ...                "device.attributes['gpu.nvidia.com'].type == 'gpu'")
    [('driver', 'gpu.nvidia.com', None), ('attribute', ('gpu.nvidia.com', 'type'), 'gpu')]
    >>> plain_selector("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi')) > 0")
    """
    atoms: list[tuple[str, Any, Any]] = []
    at, text = 0, expression.strip()
    if not text or text.endswith("&&"):
        return None
    while at < len(text):
        found = _ATOM.match(text, at)
        if found is None or found.end() == at:
            return None
        if found["driver"] is not None:
            atoms.append(("driver", _literal(found["driver"]), None))
        elif found["domain"] is not None:
            where = (found["domain"][1:-1], found["name"])
            atoms.append(("attribute", where, _literal(found["value"])))
        else:
            atoms.append(("multiple", not found["multiple"], None))
        at = found.end()
    return atoms


def _plain_answer(atoms: list[tuple[str, Any, Any]], device: Mapping[str, Any]) -> bool | None:
    """The answer of a :func:`plain_selector` on ``device``, as CEL gives it; None where this
    cannot tell it for certain (a missing domain or attribute, a value of another type: the
    library decides those, and the errors), unless an atom is false (CEL's ``&&`` is false
    whenever one side is)."""
    unknown = False
    for kind, first, second in atoms:
        if kind == "driver":
            value, wanted = device.get("driver"), first
        elif kind == "multiple":
            value, wanted = device.get("allowMultipleAllocations"), first
        else:
            value = device.get("attributes", {}).get(first[0], {}).get(first[1], _MISSING)
            wanted = second
        if type(value) is not type(wanted):
            unknown = True
            continue
        if value != wanted:
            return False
    return None if unknown else True


#: An attribute a device does not have (:func:`_plain_answer`).
_MISSING = object()


class DeviceCel:
    """Compiles DRA selector expressions once and evaluates them on devices.

    A selector of the common form (:func:`plain_selector`: the driver, attributes equal to
    literals, ``allowMultipleAllocations``; DeviceClasses of NVIDIA's DRA driver are such)
    is answered here, without the library, wherever its answer is certain; every other
    expression, and those answers that are not certain, go to the library.

    >>> from gpuopt.cluster.cel import DeviceCel, available
    >>> device = {"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {"type": "gpu"}},
    ...           "capacity": {"gpu.nvidia.com": {"memory": {"__quantity__": "40Gi"}}},
    ...           "allowMultipleAllocations": False}
    >>> cel = DeviceCel()
    >>> not available() or cel.matches(
    ...     'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', device)
    True
    """

    def __init__(self, *, plain: bool = True) -> None:
        """``plain``: answer the selectors of the common form here (False: every one by the
        library, as the tests compare)."""
        self.plain = plain
        self._programs: dict[str, Any] = {}
        self._errors: dict[str, str] = {}
        self._context: Any = None
        self._device: Mapping[str, Any] | None = None
        self._plain: dict[str, list[tuple[str, Any, Any]] | None] = {}

    def compile(self, expression: str) -> Any:
        """The compiled program of ``expression``; :class:`CelError` when it does not compile."""
        if expression in self._errors:
            raise CelError(self._errors[expression])
        program = self._programs.get(expression)
        if program is not None:
            return program
        try:
            import cel
        except ImportError:
            error = (
                "the CEL library is not installed (pip install 'gpuopt[dra]'), so CEL "
                "expressions cannot be evaluated"
            )
            self._errors[expression] = error
            raise CelError(error) from None
        try:
            program = cel.compile(expression)
        except Exception as exc:  # the library raises ValueError, and others on odd input
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self._errors[expression] = f"it does not compile ({first})"
            raise CelError(self._errors[expression]) from None
        if len(self._programs) >= _MAX_PROGRAMS:
            self._programs.clear()
        self._programs[expression] = program
        return program

    def _plain_atoms(self, expression: str) -> list[tuple[str, Any, Any]] | None:
        """:func:`plain_selector` of ``expression``, parsed once."""
        if expression not in self._plain:
            if len(self._plain) >= _MAX_PROGRAMS:
                self._plain.clear()
            self._plain[expression] = plain_selector(expression)
        return self._plain[expression]

    def evaluate(self, expression: str, device: Mapping[str, Any]) -> bool:
        """``expression`` on ``device`` (the CEL ``device`` variable, see :func:`device_variable`).

        Raises :class:`CelError` when it cannot be evaluated, including a result
        that is not a boolean (Kubernetes refuses such a selector).
        """
        atoms = self._plain_atoms(expression) if self.plain else None
        if atoms is not None:
            answer = _plain_answer(atoms, device)
            if answer is not None:
                return answer
        program = self.compile(expression)  # raises CelError when the library is missing
        import cel

        if self._context is None:
            self._context = cel.Context()
            for name, function in FUNCTIONS.items():
                self._context.add_function(name, function)
        context = self._context
        if device is not self._device:  # the same device is asked many expressions in a row
            context.add_variable("device", dict(device))
            self._device = device
        try:
            result = program.execute(context)
        except CelError:
            raise
        except Exception as exc:  # a missing key, no such overload, a failed extension
            text = str(exc).splitlines()[0] if str(exc) else ""
            raise CelError(f"it fails on this device ({type(exc).__name__}: {text})") from None
        if not isinstance(result, bool):
            raise CelError(f"it gives {short(result)}, not true or false")
        return result

    def matches(self, expression: str, device: Mapping[str, Any]) -> bool | None:
        """``expression`` on ``device``, or None when it cannot be evaluated."""
        try:
            return self.evaluate(expression, device)
        except CelError:
            return None


def device_variable(
    driver: str,
    attributes: Mapping[str, Any],
    capacity: Mapping[str, str],
    allow_multiple_allocations: bool = False,
) -> dict[str, Any]:
    """The CEL ``device`` of a device: attributes and capacities grouped by domain.

    A bare name belongs to the driver's domain, a qualified one
    (``resource.kubernetes.io/pcieRoot``) to its prefix; ``attributes`` holds
    plain values and ``{"version": "1.2.3"}`` for versions (the model's form),
    ``capacity`` the quantities' texts. The driver's domain is always present.
    """
    by_domain: dict[str, dict[str, Any]] = {driver: {}}
    for name, value in attributes.items():
        domain, _, key = name.rpartition("/")
        if isinstance(value, Mapping):
            value = {SEMVER_KEY: value["version"]}
        by_domain.setdefault(domain or driver, {})[key] = value
    amounts: dict[str, dict[str, Any]] = {driver: {}}
    for name, text in capacity.items():
        domain, _, key = name.rpartition("/")
        amounts.setdefault(domain or driver, {})[key] = {QUANTITY_KEY: text}
    return {
        "driver": driver,
        "attributes": by_domain,
        "capacity": amounts,
        "allowMultipleAllocations": allow_multiple_allocations,
    }


__all__ = [
    "FUNCTIONS",
    "CelError",
    "DeviceCel",
    "available",
    "device_variable",
    "plain_selector",
    "quantity",
]
