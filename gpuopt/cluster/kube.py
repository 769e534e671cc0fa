"""Kubernetes placement facts of the cluster model, and the rules that judge them.

These are the fields of Kubernetes objects that decide where a pod may run
(rules K1-K9 of ``models/cluster.md``): node readiness and cordons, taints and
tolerations, required node affinity, required pod (anti-)affinity with a
topology key, extended resources, and PodDisruptionBudgets. Each type mirrors
its Kubernetes API type (``core/v1`` and ``policy/v1``) with snake-case field
names; the functions implement the scheduler's matching semantics, and both
the checker and the methods call them, so a rule is written once.

>>> taint = Taint(key="gpu", value="a100", effect="NoSchedule")
>>> tolerates([Toleration(key="gpu", operator="Exists")], taint)
True
>>> tolerates([Toleration(key="gpu", value="h100")], taint)
False
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuopt._model import MAX_ID_LENGTH

_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
#: Label keys and values, taint keys and values: Kubernetes allows at most 317 / 63
#: characters; a generous cap keeps hostile input small.
MAX_KEY = 320
MAX_VALUES = 1000
#: Default priority floor: pods at or above it are never moved (the system-critical
#: classes ``system-cluster-critical`` = 2,000,000,000 and ``system-node-critical``).
CRITICAL_PRIORITY = 2_000_000_000
#: Node label the Kubernetes reader sets to ``single`` on a node in MIG single strategy:
#: what it advertises as GPUs are MIG slices.
MIG_LABEL = "gpuopt.io/mig"
#: Node label the Kubernetes reader sets when a node's GPUs are advertised under another
#: resource name than ``nvidia.com/gpu`` (``amd.com/gpu``, ...): what a pod asks for.
GPU_RESOURCE_LABEL = "gpuopt.io/gpu-resource"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: The node level's topology key.
HOSTNAME_KEY = "kubernetes.io/hostname"

SelectorValue = str | list[str]


def selector_matches(selector: dict[str, SelectorValue], labels: dict[str, str]) -> bool:
    """True when every selector key is among ``labels`` with an accepted value.

    A value may be one string (equality) or a list of strings (any of them,
    like Kubernetes' ``In`` operator).

    >>> selector_matches({"gpu_model": ["T4", "P100"]}, {"gpu_model": "T4"})
    True
    >>> selector_matches({"gpu_model": "H20"}, {})
    False
    """
    for key, wanted in selector.items():
        have = labels.get(key)
        if have is None:
            return False
        if isinstance(wanted, str):
            if have != wanted:
                return False
        elif have not in wanted:
            return False
    return True


Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
#: Effects that keep a pod off a node (PreferNoSchedule is only a preference).
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class Taint(BaseModel):
    """A node taint (``spec.taints[]``)."""

    model_config = _CONFIG

    key: str = Field(min_length=1, max_length=MAX_KEY)
    value: str | None = Field(default=None, max_length=MAX_KEY)
    effect: Effect


class Toleration(BaseModel):
    """A pod toleration (``spec.tolerations[]``).

    An empty ``key`` with ``Exists`` tolerates every taint; an empty
    ``effect`` matches every effect.
    """

    model_config = _CONFIG

    key: str | None = Field(default=None, max_length=MAX_KEY)
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = Field(default=None, max_length=MAX_KEY)
    effect: Effect | None = None

    @model_validator(mode="after")
    def _check(self) -> Toleration:
        if not self.key and self.operator != "Exists":
            raise ValueError("toleration: an empty key needs operator Exists")
        if self.operator == "Exists" and self.value:
            raise ValueError(f"toleration {self.key!r}: operator Exists takes no value")
        return self

    def matches(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == (taint.value or "")


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """True when one of ``tolerations`` tolerates ``taint``."""
    return any(toleration.matches(taint) for toleration in tolerations)


def untolerated(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> list[Taint]:
    """The NoSchedule and NoExecute taints that ``tolerations`` do not tolerate (K2)."""
    return [t for t in taints if t.effect in HARD_EFFECTS and not tolerates(tolerations, t)]


NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
LabelOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


def _check_values(what: str, key: str, operator: str, values: list[str]) -> None:
    """``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` take none (one sentence)."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"{what} {key!r}: operator {operator} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"{what} {key!r}: operator {operator} takes no values")


class LabelRequirement(BaseModel):
    """A label selector requirement (``matchExpressions[]`` of a ``LabelSelector``)."""

    model_config = _CONFIG
    #: How its errors name it.
    _what: ClassVar[str] = "label selector"

    key: str = Field(min_length=1, max_length=MAX_KEY)
    operator: LabelOperator
    values: list[str] = Field(default_factory=list, max_length=MAX_VALUES)

    @model_validator(mode="after")
    def _check(self) -> LabelRequirement:
        _check_values(self._what, self.key, self.operator, self.values)
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``In``, ``NotIn``, ``Exists`` and ``DoesNotExist`` on ``labels``."""
        have = labels.get(self.key)
        if self.operator == "Exists":
            return have is not None
        if self.operator == "DoesNotExist":
            return have is None
        if self.operator == "In":
            return have is not None and have in self.values
        return have is None or have not in self.values  # NotIn


class Requirement(LabelRequirement):
    """A node selector requirement (``matchExpressions[]``): a label requirement that may
    also compare integers (``Gt``/``Lt``)."""

    _what: ClassVar[str] = "requirement"

    operator: NodeOperator  # type: ignore[assignment]  # the label operators and Gt, Lt

    @model_validator(mode="after")
    def _check_integer(self) -> Requirement:
        count = len(self.values)
        if self.operator in ("Gt", "Lt") and (count != 1 or _integer(self.values[0]) is None):
            raise ValueError(
                f"requirement {self.key!r}: operator {self.operator} needs one integer value"
            )
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator not in ("Gt", "Lt"):
            return super().matches(labels)
        have = labels.get(self.key)
        number = None if have is None else _integer(have)
        if number is None:
            return False
        limit = _integer(self.values[0])
        assert limit is not None  # checked by the validator
        return number > limit if self.operator == "Gt" else number < limit


def _integer(text: str) -> int | None:
    try:
        return int(text, 10)
    except ValueError:
        return None


class NodeSelectorTerm(BaseModel):
    """One term of a required node affinity: its requirements all hold (ANDed).

    ``match_fields`` supports the one field Kubernetes supports,
    ``metadata.name``; it is matched against the node's id.
    """

    model_config = _CONFIG

    match_expressions: list[Requirement] = Field(default_factory=list, max_length=MAX_VALUES)
    match_fields: list[Requirement] = Field(default_factory=list, max_length=MAX_VALUES)

    @model_validator(mode="after")
    def _check(self) -> NodeSelectorTerm:
        for field in self.match_fields:
            if field.key != "metadata.name" or field.operator not in ("In", "NotIn"):
                raise ValueError(
                    f"node affinity: matchFields supports metadata.name with In or NotIn "
                    f"(got {field.key!r} {field.operator})"
                )
        return self

    def matches(self, node_id: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # Kubernetes: an empty term matches no node
        fields = {"metadata.name": node_id}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


def affinity_matches(
    terms: Sequence[NodeSelectorTerm], node_id: str, labels: Mapping[str, str]
) -> bool:
    """K3: a required node affinity (terms ORed); no terms admit every node."""
    return not terms or any(term.matches(node_id, labels) for term in terms)


class LabelSelector(BaseModel):
    """A ``metav1.LabelSelector``: labels and expressions, all ANDed; empty selects everything."""

    model_config = _CONFIG

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelRequirement] = Field(default_factory=list, max_length=MAX_VALUES)

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)


class PodAffinityTerm(BaseModel):
    """A required pod (anti-)affinity term.

    The pods it selects are those in ``namespaces`` (None: the owning pod's
    namespace; ``all_namespaces``: every namespace, Kubernetes' empty
    ``namespaceSelector``) whose labels ``selector`` matches; the term holds
    within a domain of ``topology_key`` (a node label; ``kubernetes.io/hostname``
    is the node).
    """

    model_config = _CONFIG

    selector: LabelSelector = Field(default_factory=LabelSelector)
    namespaces: list[str] | None = Field(default=None, max_length=MAX_VALUES)
    all_namespaces: bool = False
    topology_key: str = Field(default=HOSTNAME_KEY, min_length=1, max_length=MAX_KEY)

    def selects(self, owner_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when a pod in ``namespace`` with ``labels`` is among the pods this term selects."""
        if not self.all_namespaces:
            allowed = self.namespaces if self.namespaces else [owner_namespace]
            if namespace not in allowed:
                return False
        return self.selector.matches(labels)


class SpreadConstraint(BaseModel):
    """K11: a ``whenUnsatisfiable: DoNotSchedule`` topology spread constraint of a waiting
    pod (``spec.topologySpreadConstraints[]``).

    The pods it counts are those of the pod's namespace whose labels ``selector``
    matches (no pod without one), per domain of ``topology_key`` among the nodes
    eligible for it (with the label; matching the pod's node selector and required
    node affinity unless ``node_affinity_policy`` is ``Ignore``; with taints it
    tolerates when ``node_taints_policy`` is ``Honor``); a node may take the pod when
    its domain's count, plus one if the pod matches its own selector, is at most
    ``max_skew`` above the fewest of any eligible domain (0 when there are fewer than
    ``min_domains`` domains).
    """

    model_config = _CONFIG

    max_skew: int = Field(default=1, ge=1, le=2**31 - 1)
    topology_key: str = Field(default=HOSTNAME_KEY, min_length=1, max_length=MAX_KEY)
    selector: LabelSelector | None = Field(
        default=None, description="The pods it counts (None: none, as Kubernetes' null)."
    )
    min_domains: int | None = Field(default=None, ge=1, le=2**31 - 1)
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"


class Budget(BaseModel):
    """A PodDisruptionBudget (``policy/v1``): how many of the pods it selects may be down at once.

    Exactly one of ``min_available`` and ``max_unavailable``, each an integer
    or a percentage string such as ``"50%"``.
    """

    model_config = _CONFIG

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    namespace: str = Field(default="default", min_length=1, max_length=MAX_KEY)
    selector: LabelSelector = Field(default_factory=LabelSelector)
    min_available: int | str | None = None
    max_unavailable: int | str | None = None

    @model_validator(mode="after")
    def _check(self) -> Budget:
        given = [v for v in (self.min_available, self.max_unavailable) if v is not None]
        if len(given) != 1:
            raise ValueError(
                f"budget {self.id!r}: give exactly one of min_available and max_unavailable"
            )
        for name in ("min_available", "max_unavailable"):
            value = getattr(self, name)
            if isinstance(value, int) and value < 0:
                raise ValueError(f"budget {self.id!r}: {name} {value} is negative")
            if isinstance(value, str) and _percent(value) is None:
                raise ValueError(
                    f"budget {self.id!r}: {name} {value!r} is neither an integer nor a percentage"
                )
        return self

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return namespace == self.namespace and self.selector.matches(labels)

    def allowed(self, expected: int, healthy: int) -> int:
        """Disruptions allowed with ``expected`` selected pods of which ``healthy`` run.

        As the disruption controller computes it: a percentage is of
        ``expected``, rounded up; ``minAvailable`` leaves ``healthy -
        minAvailable``, ``maxUnavailable`` leaves ``healthy - (expected -
        maxUnavailable)``; never below 0.

        >>> Budget(id="b", min_available="50%").allowed(expected=5, healthy=5)
        2
        >>> Budget(id="b", max_unavailable=1).allowed(expected=3, healthy=2)
        0
        """
        if self.min_available is not None:
            wanted = _scaled(self.min_available, expected)
        else:
            assert self.max_unavailable is not None
            wanted = expected - _scaled(self.max_unavailable, expected)
        return max(0, healthy - wanted)


def _percent(text: str) -> int | None:
    if not text.endswith("%"):
        return None
    number = _integer(text[:-1])
    return number if number is not None and 0 <= number <= 100 else None


def _scaled(value: int | str, total: int) -> int:
    """An integer, or a percentage of ``total`` rounded up (``GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, int):
        return value
    percent = _percent(value)
    assert percent is not None  # checked by the validator
    return math.ceil(percent * total / 100)


#: Why a pod is never moved (K6), as the reader and the checker name it.
PinReason = Literal[
    "daemonset",
    "mirror",
    "no-controller",
    "critical",
    "terminating",
    "not-running",
    "local-storage",
    "node-locked",
    "pod-affinity",
    "budget",
    "misplaced",
    "topology-spread",
    "not-ready",
    "host-port",
    "dra-claim",
    "do-not-evict",
]

__all__ = [
    "CRITICAL_PRIORITY",
    "DEFAULT_GPU_RESOURCE",
    "GPU_RESOURCE_LABEL",
    "HARD_EFFECTS",
    "HOSTNAME_KEY",
    "MIG_LABEL",
    "Budget",
    "LabelRequirement",
    "LabelSelector",
    "NodeSelectorTerm",
    "PinReason",
    "PodAffinityTerm",
    "Requirement",
    "SelectorValue",
    "Taint",
    "Toleration",
    "affinity_matches",
    "selector_matches",
    "tolerates",
    "untolerated",
]
