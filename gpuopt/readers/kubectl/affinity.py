"""Affinity: node selector terms, pod (anti-)affinity terms and label selectors.

Used by pods (their required node and pod affinities), PersistentVolumes (the
nodes that reach them) and budgets (their selectors). :func:`and_terms` joins a
pod's node affinity with its volumes'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuopt.readers.kubectl.context import Context
from gpuopt.readers.kubectl.fields import Reader
from gpuopt.readers.kubectl.names import TERMS


def requirements(reader: Reader, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    """The requirements (``key``, ``operator``, ``values``) listed at ``parent[key]``."""
    found = []
    for position, item in enumerate(reader.objects(parent, key, path)):
        where = f"{path}[{position}]"
        found.append(
            {
                "key": reader.text(item, "key", f"{where}.key"),
                "operator": reader.text(item, "operator", f"{where}.operator"),
                "values": reader.texts(item, "values", f"{where}.values"),
            }
        )
    return found


def node_affinity(reader: Reader, affinity: Mapping[str, Any]) -> list[Any]:
    """Every required node affinity term (ORed)."""
    return node_terms(reader, affinity, "nodeAffinity", "spec.affinity.nodeAffinity")


def node_terms(
    reader: Reader,
    parent: Mapping[str, Any],
    field: str,
    path: str,
    *,
    key: str = TERMS,
) -> list[Any]:
    """The node selector terms (ORed) of ``parent[field][key]`` (a pod's required node
    affinity, or a PersistentVolume's ``nodeAffinity.required``)."""
    section = reader.mapping(parent, field, path)
    required = reader.mapping(section, key, f"{path}.{key}")
    return selector_terms(reader, required, f"{path}.{key}")


def selector_terms(reader: Reader, selector: Mapping[str, Any], path: str) -> list[Any]:
    """The terms (ORed) of a ``NodeSelector`` (``{"nodeSelectorTerms": [...]}``) at
    ``path``, each as the cluster model's ``match_expressions`` and ``match_fields``."""
    path = f"{path}.nodeSelectorTerms"
    terms = []
    for position, term in enumerate(reader.objects(selector, "nodeSelectorTerms", path)):
        where = f"{path}[{position}]"
        terms.append(
            {
                "match_expressions": requirements(
                    reader, term, "matchExpressions", f"{where}.matchExpressions"
                ),
                "match_fields": requirements(reader, term, "matchFields", f"{where}.matchFields"),
            }
        )
    return terms


def pod_terms(
    ctx: Context,
    reader: Reader,
    affinity: Mapping[str, Any],
    pod_id: str,
    labels: Mapping[str, str],
) -> tuple[dict[str, list[Any]], bool]:
    """Its required pod affinity and anti-affinity terms, and whether one needs Namespaces.
    A term's ``matchLabelKeys`` and ``mismatchLabelKeys`` join its label selector as the
    API server merges them (KEP-3633): ``key In (value)`` and ``key NotIn (value)`` with
    the pod's own value of each key it has (a key it lacks is ignored); a selector the
    server merged already gets the same requirement again, which changes nothing."""
    found: dict[str, list[Any]] = {}
    unresolved = dropped = False
    for kind, field_name in (
        ("podAffinity", "pod_affinity"),
        ("podAntiAffinity", "pod_anti_affinity"),
    ):
        section = reader.mapping(affinity, kind, f"spec.affinity.{kind}")
        path = f"spec.affinity.{kind}.{TERMS}"
        terms = []
        for position, term in enumerate(reader.objects(section, TERMS, path)):
            where = f"{path}[{position}]"
            if term.get("labelSelector") is None:
                dropped = True  # a null selector selects no pod: the term holds everywhere
                continue
            topology_key = reader.text(term, "topologyKey", f"{where}.topologyKey")
            if topology_key is None:
                reader.fail(f"{where}.topologyKey is missing")
            namespace_selector = term.get("namespaceSelector")
            if namespace_selector is not None:
                selector = reader.mapping(term, "namespaceSelector", f"{where}.namespaceSelector")
                unresolved = unresolved or any(selector.values())
            selector = label_selector(reader, term, "labelSelector", f"{where}.labelSelector")
            _label_keys(reader, term, selector, labels, where)
            entry: dict[str, Any] = {
                "selector": selector,
                "topology_key": topology_key,
                "all_namespaces": namespace_selector is not None,
            }
            namespaces = reader.texts(term, "namespaces", f"{where}.namespaces")
            if namespaces:
                entry["namespaces"] = namespaces
            terms.append(entry)
        found[field_name] = terms
    if dropped:
        ctx.note("null-selector", pod_id)
    return found, unresolved


def _label_keys(
    reader: Reader,
    term: Mapping[str, Any],
    selector: dict[str, Any],
    labels: Mapping[str, str],
    where: str,
) -> None:
    """Join a term's ``matchLabelKeys`` (``key In``) and ``mismatchLabelKeys`` (``key
    NotIn``) to ``selector`` with the pod's own value of each key it has, as the API server
    and kube-scheduler merge them (a key the pod lacks is ignored)."""
    for field, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for key in reader.texts(term, field, f"{where}.{field}"):
            if key in labels:
                selector["match_expressions"].append(
                    {"key": key, "operator": operator, "values": [labels[key]]}
                )


def spread_constraints(
    reader: Reader, spec: Mapping[str, Any], labels: Mapping[str, str]
) -> list[dict[str, Any]]:
    """K11: a waiting pod's ``whenUnsatisfiable: DoNotSchedule`` topology spread
    constraints, in the cluster model's form (``matchLabelKeys`` joined to the selector);
    the ``ScheduleAnyway`` ones are preferences, left out (counted by the caller). A
    constraint without a label selector counts no pod."""
    found = []
    path = "spec.topologySpreadConstraints"
    for position, constraint in enumerate(reader.objects(spec, "topologySpreadConstraints", path)):
        where = f"{path}[{position}]"
        when = constraint.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            reader.fail(
                f"{where}.whenUnsatisfiable must be DoNotSchedule or ScheduleAnyway (got {when!r})"
            )
        if when != "DoNotSchedule":
            continue
        key = reader.text(constraint, "topologyKey", f"{where}.topologyKey")
        if key is None:
            reader.fail(f"{where}.topologyKey is missing")
        entry: dict[str, Any] = {"topology_key": key}
        skew = constraint.get("maxSkew", 1)
        if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
            reader.fail(f"{where}.maxSkew must be a whole number of at least 1 (got {skew!r})")
        entry["max_skew"] = skew
        if constraint.get("labelSelector") is not None:  # (none: it counts no pod)
            selector = label_selector(reader, constraint, "labelSelector", f"{where}.labelSelector")
            _label_keys(reader, constraint, selector, labels, where)
            entry["selector"] = selector
        domains = constraint.get("minDomains")
        if domains is not None:
            if isinstance(domains, bool) or not isinstance(domains, int) or domains < 1:
                reader.fail(
                    f"{where}.minDomains must be a whole number of at least 1 (got {domains!r})"
                )
            entry["min_domains"] = domains
        for field, name in (
            ("nodeAffinityPolicy", "node_affinity_policy"),
            ("nodeTaintsPolicy", "node_taints_policy"),
        ):
            policy = reader.text(constraint, field, f"{where}.{field}")
            if policy is not None:
                if policy not in ("Honor", "Ignore"):
                    reader.fail(f"{where}.{field} must be Honor or Ignore (got {policy!r})")
                entry[name] = policy
        found.append(entry)
    return found


def label_selector(
    reader: Reader, parent: Mapping[str, Any], key: str, path: str
) -> dict[str, Any]:
    """The label selector at ``parent[key]`` (``matchLabels``, ``matchExpressions``)."""
    selector = reader.mapping(parent, key, path)
    return {
        "match_labels": reader.strings(selector, "matchLabels", f"{path}.matchLabels"),
        "match_expressions": requirements(
            reader, selector, "matchExpressions", f"{path}.matchExpressions"
        ),
    }


#: Most node selector terms a pod's affinity ANDed with its volumes' may expand to.
MAX_TERMS = 64


def and_terms(alternatives: list[list[Any]]) -> list[Any] | None:
    """Node selector terms (each list ORed) ANDed together, as one list of terms (ORed):
    every combination of one term from each list, their requirements joined. An empty
    list admits every node. None when the product would exceed :data:`MAX_TERMS`."""
    result: list[Any] = [{"match_expressions": [], "match_fields": []}]
    for terms in alternatives:
        if not terms:
            continue
        if len(result) * len(terms) > MAX_TERMS:
            return None
        result = [
            {
                "match_expressions": [*left["match_expressions"], *right["match_expressions"]],
                "match_fields": [*left["match_fields"], *right["match_fields"]],
            }
            for left in result
            for right in terms
        ]
    return result
