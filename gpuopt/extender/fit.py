"""The extender's filter: which nodes may take the pod, and why the others may not (E2-E4).

:func:`fit` judges the candidate nodes of a request at once, rule by rule on
the state's arrays, and gives each failed node the first rule it breaks, in
one sentence, marked *unresolvable* when the node could not take the pod
even with every pod on it stopped (a static rule, or a node too small).
:func:`refusal_after` is the same judgement for one node with some of its
tasks stopped, as preemption (E6) asks it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from gpuopt.cluster.fields import offered
from gpuopt.cluster.kube import PodAffinityTerm
from gpuopt.cluster.model import scaled
from gpuopt.cluster.shares import MILLI
from gpuopt.extender.claims import resolve
from gpuopt.extender.pod import Ask
from gpuopt.extender.state import State, node_left


@dataclass
class Fit:
    """The filter's verdict on the candidate nodes: who passes, and why the others fail."""

    positions: np.ndarray
    passed: np.ndarray
    reasons: dict[int, tuple[str, bool]]  # position -> (sentence, unresolvable)


#: Device-fit answers a state keeps for prioritize (E9) before it forgets them all.
FITS_KEPT = 65_536


def _nodes_word(count: int) -> str:
    return "1 GPU" if count == 1 else f"{count} GPUs"


def fit(state: State, ask: Ask, positions: np.ndarray, *, explain: bool = True) -> Fit:
    """E2-E4 on the nodes at ``positions``: the first rule each breaks, in rule order.

    With ``explain`` False the verdicts are the same but the capacity rules (K4, C3, C7)
    leave their sentences empty: what a caller that only needs ``passed`` (the scores)
    asks, since writing a sentence per failed node is most of the filter's work.
    """
    # per entry of positions: not refused yet (the rules run on the arrays of these)
    judged = _Judged(positions, np.ones(len(positions), dtype=bool), {}, explain)
    reasons = judged.reasons
    refused, refused_nodes = state.refused_mask(ask)  # K1-K3
    if refused:
        hit = refused_nodes[positions]
        for pos in positions[hit].tolist():
            reasons[pos] = (refused[pos], True)
        judged.open_ &= ~hit
    _extended_rules(state, ask, judged)
    _gpu_rules(state, ask, judged)
    _size_rules(state, ask, judged)
    if ask.claim_refs:  # E8 (a pod without claims pays this test alone)
        before = len(reasons)
        _device_rules(state, ask, positions[judged.open_], reasons)
        if len(reasons) > before:
            judged.close()
    before = len(reasons)
    _pod_terms(state, ask, positions[judged.open_], reasons)
    if len(reasons) > before:
        judged.close()
    return Fit(positions=positions, passed=judged.open_, reasons=reasons)


@dataclass
class _Judged:
    """The nodes :func:`fit` judges, rule after rule: their ``positions``, which are still
    ``open_`` (no rule broken yet), the ``reasons`` of the others, and whether sentences
    are written (``explain``)."""

    positions: np.ndarray
    open_: np.ndarray
    reasons: dict[int, tuple[str, bool]]  # position -> (sentence, unresolvable)
    explain: bool

    def close(self) -> None:
        """Close every open entry that has a reason (after a rule that judged node by
        node)."""
        reasons = self.reasons
        self.open_ &= ~np.isin(
            self.positions, np.fromiter(reasons, dtype=np.int64, count=len(reasons))
        )

    def fail(
        self, mask: np.ndarray, why: Callable[[list[int]], list[str]], static: np.ndarray | bool
    ) -> None:
        """Give each open node of ``positions[mask]`` the reason ``why`` writes for it
        (``why(nodes)``: one sentence per node; empty sentences unless ``explain``), and
        close it."""
        hit = mask & self.open_
        if not hit.any():
            return
        self.open_ &= ~hit
        failed = self.positions[hit].tolist()
        hard = np.broadcast_to(np.asarray(static, dtype=bool), mask.shape)[hit].tolist()
        sentences = why(failed) if self.explain else [""] * len(failed)
        self.reasons.update(zip(failed, zip(sentences, hard, strict=True), strict=True))


def _extended_rules(state: State, ask: Ask, judged: _Judged) -> None:
    """K4: each extended resource the pod asks for must be free on the node."""
    nodes = state.cluster.nodes
    names = state.names
    positions = judged.positions
    for name, amount in ask.pending.resources.items():  # K4
        everywhere = state.extra_free(name)
        free = everywhere[positions]
        capacity = np.array(
            [offered(nodes[p].resources, name) for p in positions.tolist()], dtype=np.int64
        )

        def short(
            failed: list[int], name: str = name, amount: int = amount, free: np.ndarray = everywhere
        ) -> list[str]:
            return [
                f"K4: node {names[pos]} has {left} {name} free; the pod asks for {amount}"
                for pos, left in zip(failed, free[failed].tolist(), strict=True)
            ]

        judged.fail(free < amount, short, capacity < amount)


def _gpu_rules(state: State, ask: Ask, judged: _Judged) -> None:
    """C7 for a share of a GPU, else C3 for whole GPUs and N3 for their bandwidth."""
    names = state.names
    positions = judged.positions
    gpus = state.gpus[positions]
    milli = ask.milli
    if milli is not None:  # C7

        def no_share(failed: list[int]) -> list[str]:
            return [
                f"C7: node {names[pos]} has no GPU with {milli} thousandths left "
                f"(the most one has is {max(best, 0)})"
                for pos, best in zip(failed, state.best_share[failed].tolist(), strict=True)
            ]

        best = state.best_share[positions]
        judged.fail(best < milli, no_share, gpus == 0)
    elif ask.gpus > 0:  # C3 whole GPUs
        wanted = ask.gpus

        def few_gpus(failed: list[int]) -> list[str]:
            return [
                f"C3: node {names[pos]} has {_nodes_word(free)} free; the pod asks for {wanted}"
                for pos, free in zip(failed, state.free_whole[failed].tolist(), strict=True)
            ]

        free = state.free_whole[positions]
        judged.fail(free < wanted, few_gpus, gpus < wanted)
        if ask.min_bandwidth > 0 and ask.gpus >= 2:  # N3
            before = len(judged.reasons)
            _bandwidth_rule(state, ask, positions[judged.open_], judged.reasons)
            if len(judged.reasons) > before:
                judged.close()


def _bandwidth_rule(
    state: State, ask: Ask, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """N3: the node must have ``ask.gpus`` free GPUs whose every pair is fast enough."""
    for pos in positions.tolist():
        topology = state.topologies[pos]
        if pos in reasons or topology is None:
            continue
        found = topology.best_set(int(state.free_mask[pos]), ask.gpus, ask.min_bandwidth)
        if found is None:
            static = topology.best_set(topology.full_mask, ask.gpus, ask.min_bandwidth)
            reasons[pos] = (
                f"N3: node {state.names[pos]} has no {ask.gpus} free GPUs whose every pair "
                f"reaches {ask.min_bandwidth:g} GB/s",
                static is None,
            )


def _size_rules(state: State, ask: Ask, judged: _Judged) -> None:
    """C3 for CPUs and memory: the node must have what the pod asks for free."""
    names = state.names
    positions = judged.positions
    pending = ask.pending
    cpus = scaled(pending.cpus)

    def few_cpus(failed: list[int]) -> list[str]:
        asked = f"{pending.cpus:g}"
        return [
            f"C3: node {names[pos]} has {free / 1000:g} CPUs free; the pod asks for {asked}"
            for pos, free in zip(failed, state.cpus_free[failed].tolist(), strict=True)
        ]

    judged.fail(state.cpus_free[positions] < cpus, few_cpus, state.cpus[positions] < cpus)
    if pending.memory:
        memory = scaled(pending.memory)
        free_memory = state.memory_free[positions]

        def little_memory(failed: list[int]) -> list[str]:
            asked = f"{pending.memory:g}"
            return [
                f"C3: node {names[pos]} has {free / 1000:g} MiB of memory free; the pod asks "
                f"for {asked}"
                for pos, free in zip(failed, state.memory_free[failed].tolist(), strict=True)
            ]

        node_memory = state.memory[positions]
        judged.fail(
            (free_memory >= 0) & (free_memory < memory),
            little_memory,
            (node_memory >= 0) & (node_memory < memory),
        )


def _device_rules(
    state: State, ask: Ask, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """E8: the pod's DRA claims on each node at ``positions`` (DF1-DF8 by
    :func:`~gpuopt.cluster.devicefit.claims_fit`, one CEL selection for every node): a
    node passes only on *fits*. *Refused* is unresolvable when the claims do not fit the
    node with nothing allocated either (or DF1: allocated on another node); *unknown*
    and a claim the state does not have refuse, resolvable (it may appear)."""
    from gpuopt.cluster.devicefit import DeviceNode, claims_fit

    resolved = resolve(state, ask.pending, ask.claim_refs)
    if resolved.missing is not None:
        for pos in positions.tolist():
            reasons[pos] = (resolved.missing, False)
        return
    selection = state.selection()
    pod_id = ask.pending.id
    if len(state.fits) > FITS_KEPT:
        state.fits = {}
    ids = tuple(claim.id for claim in resolved.claims)
    for pos in positions.tolist():
        node = state.device_node(pos, without=pod_id)
        answer = claims_fit(node, resolved.claims, selection)
        state.fits[pod_id, pos, ids] = answer  # for prioritize (E9), until the devices change
        if answer.fits:
            continue
        if answer.status == "unknown":
            reasons[pos] = (f"E8: node {state.names[pos]}: {answer.reason}", False)
            continue
        hard = answer.rule == "DF1"
        if not hard:
            empty = DeviceNode(node.name, node.devices, node.counters, ())
            hard = claims_fit(empty, resolved.claims, selection).status == "refused"
        reasons[pos] = (answer.reason, hard)


def _selected(
    state: State, term: PodAffinityTerm, space: str, exclude: Iterable[str] = ()
) -> set[int]:
    """The domain codes (at the term's key) holding a running task the term selects."""
    codes = state.domain_codes(term.topology_key)
    skip = set(exclude)
    found: set[int] = set()
    for group in state.label_groups():
        if not term.selects(space, group.space, group.labels):
            continue
        if skip:
            positions = [state.node_pos[task.node] for task in group.tasks if task.id not in skip]
            held = codes[np.asarray(positions, dtype=np.int64)]
        else:
            held = codes[group.positions]
        found.update(code for code in np.unique(held).tolist() if code >= 0)
    return found


def _pod_terms(
    state: State, ask: Ask, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """K5 on the nodes at ``positions``, those not refused yet (E4)."""
    pending = ask.pending
    if not (pending.pod_anti_affinity or pending.pod_affinity or state.anti_terms):
        return  # no term to check
    nodes = state.cluster.nodes
    space = pending.space
    open_positions = positions  # the nodes not refused yet
    if open_positions.size == 0:
        return
    for term in pending.pod_anti_affinity:
        codes = state.domain_codes(term.topology_key)[open_positions]
        taken = _selected(state, term, space)
        near = open_positions[np.isin(codes, list(taken))] if taken else open_positions[:0]
        for pos in near.tolist():
            if pos not in reasons:
                reasons[pos] = (
                    f"K5: the pod requires anti-affinity on {term.topology_key} with pods "
                    f"already in the domain of node {nodes[pos].id}",
                    False,
                )
    for term in pending.pod_affinity:
        codes = state.domain_codes(term.topology_key)[open_positions]
        holding = _selected(state, term, space)
        if not holding and term.selects(space, space, pending.labels):
            continue  # the first pod of a group that selects itself goes anywhere
        for pos, code in zip(open_positions.tolist(), codes.tolist(), strict=True):
            if code not in holding and pos not in reasons:
                reasons[pos] = (
                    f"K5: the pod requires affinity on {term.topology_key} with pods that are "
                    f"not in the domain of node {nodes[pos].id}",
                    False,
                )
    _running_terms(state, ask, open_positions, reasons)


def _running_terms(
    state: State, ask: Ask, positions: np.ndarray, reasons: dict[int, tuple[str, bool]]
) -> None:
    """K5's last part: the running pods' required anti-affinity terms that select the pod
    close the nodes of their pod's domain. A node gets the sentence of the first such term
    in ``state.anti_terms`` order, and the sentences go in as a loop over the terms, each
    over the nodes in the request's order, would put them; the nodes are matched once per
    topology key, not once per term (pods assumed in a burst bring many terms)."""
    pending = ask.pending
    space = pending.space
    first: dict[str, dict[int, int]] = {}  # topology key -> domain code -> first term there
    for group in state.term_groups():
        term = group.term
        if not term.selects(group.space, space, pending.labels):
            continue
        homes = state.domain_codes(term.topology_key)[group.positions]
        there = first.setdefault(term.topology_key, {})
        for home, index in zip(homes.tolist(), group.indices.tolist(), strict=True):
            if home >= 0 and index < there.get(home, index + 1):
                there[home] = index
    if not first:
        return
    winners: dict[int, tuple[int, int]] = {}  # node position -> (term index, request order)
    listed = positions.tolist()
    for key, homes in first.items():
        codes = state.domain_codes(key)[positions]
        near = np.flatnonzero(np.isin(codes, list(homes)))
        for order, code in zip(near.tolist(), codes[near].tolist(), strict=True):
            pos, index = listed[order], homes[code]
            if pos not in winners or index < winners[pos][0]:
                winners[pos] = (index, order)
    nodes = state.cluster.nodes
    for pos, (index, _) in sorted(winners.items(), key=lambda item: item[1]):
        if pos not in reasons:
            owner, term = state.anti_terms[index]
            reasons[pos] = (
                f"K5: {owner.id} requires anti-affinity on {term.topology_key} with the "
                f"pod, and runs in the domain of node {nodes[pos].id}",
                False,
            )


def refusal_after(state: State, ask: Ask, pos: int, removed: set[str]) -> str | None:
    """Why the node at ``pos`` cannot take the pod once the tasks ``removed`` stop (None: it
    can); the node-by-node path of E2-E4 that preemption (E6) asks."""
    node = state.cluster.nodes[pos]
    pending = ask.pending
    why = state.refused(ask).get(pos)
    if why is not None:
        return why
    tasks = [task for task in state.on_node[pos] if task.id not in removed]
    for name, amount in pending.resources.items():
        free = offered(node.resources, name) - sum(t.resources.get(name, 0) for t in tasks)
        if free < amount:
            return f"K4: node {node.id} has {free} {name} free; the pod asks for {amount}"
    left = node_left(node, tasks)
    if ask.milli is not None:
        if max(left, default=-1) < ask.milli:
            return f"C7: node {node.id} has no GPU with {ask.milli} thousandths left"
    elif ask.gpus > 0:
        free_gpus = [gpu for gpu, value in enumerate(left) if value == MILLI]
        if len(free_gpus) < ask.gpus:
            have = _nodes_word(len(free_gpus))
            return f"C3: node {node.id} has {have} free; the pod asks for {ask.gpus}"
        topology = state.topologies[pos]
        if ask.min_bandwidth > 0 and ask.gpus >= 2 and topology is not None:
            mask = sum(1 << gpu for gpu in free_gpus)
            if topology.best_set(mask, ask.gpus, ask.min_bandwidth) is None:
                return (
                    f"N3: node {node.id} has no {ask.gpus} free GPUs whose every pair reaches "
                    f"{ask.min_bandwidth:g} GB/s"
                )
    cpus = scaled(node.cpus) - sum(scaled(t.cpus) for t in tasks)
    if cpus < scaled(pending.cpus):
        return (
            f"C3: node {node.id} has {cpus / 1000:g} CPUs free; the pod asks for {pending.cpus:g}"
        )
    if node.memory is not None and pending.memory:
        memory = scaled(node.memory) - sum(scaled(t.memory or 0) for t in tasks)
        if memory < scaled(pending.memory):
            return f"C3: node {node.id} lacks memory ({pending.memory:g} asked)"
    space = pending.space
    for term in pending.pod_anti_affinity:
        code = int(state.domain_codes(term.topology_key)[pos])
        if code >= 0 and code in _selected(state, term, space, removed):
            return f"K5: the pod requires anti-affinity on {term.topology_key} near node {node.id}"
    for term in pending.pod_affinity:
        holding = _selected(state, term, space, removed)
        if not holding and term.selects(space, space, pending.labels):
            continue
        if int(state.domain_codes(term.topology_key)[pos]) not in holding:
            return f"K5: the pod requires affinity on {term.topology_key} near node {node.id}"
    for owner, term in state.anti_terms:
        if owner.id in removed or not term.selects(owner.space, space, pending.labels):
            continue
        codes = state.domain_codes(term.topology_key)
        home = int(codes[state.node_pos[owner.node]])
        if home >= 0 and int(codes[pos]) == home:
            return f"K5: {owner.id} requires anti-affinity on {term.topology_key} with the pod"
    if ask.claim_refs:  # E8 with the claims only the removed pods hold given back
        from gpuopt.cluster.devicefit import DeviceNode, claims_fit

        resolved = resolve(state, pending, ask.claim_refs)
        if resolved.missing is not None:
            return resolved.missing
        here = state.device_node(pos, without=pending.id)
        kept = tuple(
            claim for claim in here.allocated if not claim.pods or set(claim.pods) - removed
        )
        freed = DeviceNode(here.name, here.devices, here.counters, kept)
        answer = claims_fit(freed, resolved.claims, state.selection())
        if not answer.fits:
            return answer.reason
    return None


__all__ = ["Fit", "fit", "refusal_after"]
