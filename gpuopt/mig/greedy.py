"""First fit (what a DRA scheduler does today) and the MIG layout heuristic.

Both place one pod at a time with the same search, which keeps every rule by
construction: a pod's requests are served one after the other on one node it
may use (M1, M2); a request takes one alternative and ``count`` free devices of
its profile (M3), each taken only if it is not in use or taken already (M4)
and its draws fit what is left of its GPU's counters (M5); the devices of a
claim that asks one GPU are taken on the GPU of its first device (M6). The
search backtracks over devices in a given order, as Kubernetes' allocator does,
and gives up on a pod after :data:`WORK_LIMIT` device steps.

- :func:`solve_first_fit`: pods in arrival order, nodes in order, each
  request's first alternative and first devices (in the slices' order) that
  fit: the DRA allocator without scoring.
- :func:`solve_heuristic` (the default): devices ordered to cut few GPUs and
  keep placements open (a device on a GPU cut already before one on a fresh
  GPU; then the fewest placements it closes on its GPU; then the fullest GPU,
  best fit), a request's smallest alternative first; each pod goes to the node
  where it costs least. Pods in two orders (arrival, and heaviest and largest
  first); then two local improvements: a repack of a node with a pod left out,
  and a move of each served pod to where the answer scores best. The best of
  these and of first fit by the score is kept, so it never serves less weight
  than first fit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gpuopt.mig.problem import MigClaim, MigPod, MigProblem
from gpuopt.mig.solution import MigPick, MigResult, evaluate, make_result
from gpuopt.result import heuristic_note
from gpuopt.solvers.deadline import Deadline

#: Device steps the search may take for one pod on one node before giving up.
WORK_LIMIT = 5_000

#: Node repacks the local improvement tries at most.
REPACKS = 200

#: ``order(layout, candidates)``: the candidates (placement positions) in the order to try.
Order = Callable[["Layout", list[int]], list[int]]


class Layout:
    """What is taken and what is left while a method places pods (a mutable view)."""

    def __init__(self, problem: MigProblem) -> None:
        index = self.index = problem.index
        self.problem = problem
        self.left = [list(row) for row in index.residual]
        self.used = list(index.in_use)
        self.cut = list(index.cut_before)
        self.cut_by = [0] * index.gpus  # MIG placements taken by the plan, per GPU
        self.picks: list[MigPick] = []
        self._closes: dict[tuple[int, tuple[int, ...]], dict[int, int]] = {}
        self._open: dict[tuple[int, tuple[int, ...]], int] = {}
        # (gpu, profile) -> counter -> the least any placement of the profile draws there
        self.least: dict[tuple[int, str], dict[int, int]] = {}
        for p in range(index.placements):
            key = (index.gpu[p], index.profile[p])
            drawn = index.draws[p]
            known = self.least.get(key)
            if known is None:
                self.least[key] = dict(drawn)
            else:
                for k in list(known):
                    known[k] = min(known[k], drawn.get(k, 0))

    def fits(self, p: int) -> bool:
        """Whether placement ``p`` is free and its draws fit what its GPU has left."""
        if self.used[p]:
            return False
        row = self.left[self.index.gpu[p]]
        return all(value <= row[k] for k, value in self.index.draws[p].items())

    def take(self, p: int) -> None:
        """Allocate ``p``."""
        index = self.index
        g = index.gpu[p]
        self.used[p] = True
        for k, value in index.draws[p].items():
            self.left[g][k] -= value
        if not index.whole[p]:
            self.cut_by[g] += 1
            self.cut[g] = True

    def release(self, p: int) -> None:
        """Undo :meth:`take` of ``p``."""
        index = self.index
        g = index.gpu[p]
        self.used[p] = False
        for k, value in index.draws[p].items():
            self.left[g][k] += value
        if not index.whole[p]:
            self.cut_by[g] -= 1
            self.cut[g] = index.cut_before[g] or self.cut_by[g] > 0

    def open_on(self, g: int) -> int:
        """Placements of GPU ``g`` whose draws fit what it has left (remembered per GPU and
        what it has left; a placement in use draws what is gone, so it never fits)."""
        key = (g, tuple(self.left[g]))
        found = self._open.get(key)
        if found is None:
            row = self.left[g]
            found = self._open[key] = sum(
                1
                for p in self.index.members[g]
                if all(value <= row[k] for k, value in self.index.draws[p].items())
            )
        return found

    def share(self, profile: str, count: int) -> float:
        """What ``count`` devices of ``profile`` take of a GPU: the mean over its counters of
        the least a placement draws over the capacity (for ordering alternatives)."""
        for g in range(self.index.gpus):
            least = self.least.get((g, profile))
            if least is not None:
                capacity = self.index.capacity[g]
                shares = [v / capacity[k] for k, v in least.items() if capacity[k]]
                return count * sum(shares) / max(1, len(capacity))
        return float("inf")

    def could_hold(self, g: int, claim: MigClaim) -> bool:
        """Whether GPU ``g`` has left, counter by counter, what ``claim``'s cheapest
        alternatives draw at least (a necessary condition, to prune the search)."""
        need: dict[int, int] = {}
        for request in claim.requests:
            cheapest: dict[int, int] | None = None
            for alternative in request.alternatives:
                least = self.least.get((g, alternative.profile))
                if least is None:
                    continue
                drawn = {k: alternative.count * value for k, value in least.items()}
                if cheapest is None:
                    cheapest = drawn
                else:
                    cheapest = {k: min(v, drawn.get(k, 0)) for k, v in cheapest.items()}
            if cheapest is None:
                return False
            for k, value in cheapest.items():
                need[k] = need.get(k, 0) + value
        row = self.left[g]
        return all(value <= row[k] for k, value in need.items())

    def closes(self, p: int) -> int:
        """How many placements of ``p``'s GPU whose draws fit what is left stop fitting when
        ``p`` is allocated (``p`` included); remembered per GPU and what it has left."""
        index = self.index
        g = index.gpu[p]
        key = (g, tuple(self.left[g]))
        known = self._closes.get(key)
        if known is None:
            known = self._closes[key] = {}
        found = known.get(p)
        if found is None:
            row = self.left[g]
            after = list(row)
            for k, value in index.draws[p].items():
                after[k] -= value
            found = 0
            for other in index.members[g]:
                draws = index.draws[other].items()
                if all(value <= row[k] for k, value in draws) and not all(
                    value <= after[k] for k, value in draws
                ):
                    found += 1
            known[p] = found
        return found

    def place(
        self, pod: MigPod, node: int, order: Order, *, smallest: bool = False
    ) -> list[tuple[str, str, int]] | None:
        """Take devices for every request of ``pod`` on ``node`` (backtracking, devices in
        ``order``; alternatives in the request's order, or the smallest first with
        ``smallest``); the ``(claim, request name, placement)`` taken, or None (nothing
        taken)."""
        units = [(claim, request) for claim in pod.claims for request in claim.requests]
        chosen: list[tuple[str, str, int]] = []
        gpu_of_claim: dict[str, int] = {}
        steps = [0]
        here = [g for g in range(self.index.gpus) if self._on(g, node)]
        allowed: dict[str, set[int]] = {}
        for claim in pod.claims:
            if claim.same_gpu:
                allowed[claim.id] = {g for g in here if self.could_hold(g, claim)}
                if not allowed[claim.id]:
                    return None

        def enough(v: int) -> bool:
            """Forward check: request ``v`` still has an alternative with enough devices."""
            _, request = units[v]
            for alternative in request.alternatives:
                free = self.index.free.get((node, alternative.profile), [])
                if sum(1 for p in free if self.fits(p)) >= alternative.count:
                    return True
            return False

        def serve(u: int) -> bool:
            if u == len(units):
                return True
            if not all(enough(v) for v in range(u, len(units))):
                return False
            claim, request = units[u]
            alternatives = request.alternatives
            if smallest and len(alternatives) > 1:
                alternatives = sorted(
                    alternatives, key=lambda alt: self.share(alt.profile, alt.count)
                )
            for alternative in alternatives:
                free = self.index.free.get((node, alternative.profile), [])
                fitting = [p for p in free if self.fits(p)]
                if claim.same_gpu:
                    fitting = [p for p in fitting if self.index.gpu[p] in allowed[claim.id]]
                if len(fitting) < alternative.count:
                    continue
                candidates = order(self, fitting)
                name = request.alternative_name(alternative)
                if pick(u, candidates, 0, alternative.count, name, claim.id, claim.same_gpu):
                    return True
            return False

        def pick(
            u: int,
            candidates: list[int],
            start: int,
            need: int,
            name: str,
            claim_id: str,
            same: bool,
        ) -> bool:
            if need == 0:
                return serve(u + 1)
            for position in range(start, len(candidates) - need + 1):
                p = candidates[position]
                steps[0] += 1
                if steps[0] > WORK_LIMIT:
                    return False
                g = self.index.gpu[p]
                if same and gpu_of_claim.get(claim_id, g) != g:
                    continue
                if not self.fits(p):
                    continue
                fresh = same and claim_id not in gpu_of_claim
                if fresh:
                    gpu_of_claim[claim_id] = g
                self.take(p)
                chosen.append((claim_id, name, p))
                if pick(u, candidates, position + 1, need - 1, name, claim_id, same):
                    return True
                chosen.pop()
                self.release(p)
                if fresh:
                    del gpu_of_claim[claim_id]
            return False

        if serve(0):
            return chosen
        return None

    def _on(self, g: int, node: int) -> bool:
        """Whether GPU ``g`` is on ``node``."""
        members = self.index.members[g]
        return bool(members) and self.index.node[members[0]] == node

    def keep(self, taken: Sequence[tuple[str, str, int]]) -> None:
        """Record what :meth:`place` took as picks."""
        for claim, request, p in taken:
            self.picks.append(MigPick(claim=claim, request=request, device=self.index.keys[p]))

    def undo(self, taken: Sequence[tuple[str, str, int]]) -> None:
        """Release what :meth:`place` took (not recorded)."""
        for _, _, p in taken:
            self.release(p)


def slice_order(layout: Layout, candidates: list[int]) -> list[int]:
    """The devices in the order the ResourceSlice lists them (first fit)."""
    return candidates


def layout_order(layout: Layout, candidates: list[int]) -> list[int]:
    """Devices on GPUs cut already first, then those closing the fewest placements, then on
    the fullest GPU (best fit), then in the slices' order."""
    index = layout.index

    def key(p: int) -> tuple[int, int, int, int]:
        g = index.gpu[p]
        fresh = 0 if layout.cut[g] or index.whole[p] else 1
        return (fresh, layout.closes(p), layout.open_on(g), p)

    return sorted(candidates, key=key)


def _first_fit(problem: MigProblem) -> list[MigPick]:
    layout = Layout(problem)
    index = problem.index
    for q, pod in enumerate(problem.pods):
        for node in index.pod_nodes[q]:
            taken = layout.place(pod, node, slice_order)
            if taken is not None:
                layout.keep(taken)
                break
    return layout.picks


def _cost(layout: Layout, taken: Sequence[tuple[str, str, int]]) -> tuple[int, int]:
    """What placing ``taken`` (already taken in ``layout``) costs: GPUs it cuts newly, then
    the placements it leaves open (more is better, so negated)."""
    index = layout.index
    gpus = {index.gpu[p] for _, _, p in taken}
    newly = sum(
        1
        for g in gpus
        if not index.cut_before[g]
        and layout.cut_by[g]
        == sum(1 for _, _, p in taken if index.gpu[p] == g and not index.whole[p])
        and layout.cut_by[g] > 0
    )
    return newly, -sum(layout.open_on(g) for g in gpus)


def _greedy(problem: MigProblem, pods: Sequence[int], layout: Layout | None = None) -> Layout:
    """Place ``pods`` (positions) in that order, each on its cheapest node."""
    layout = layout or Layout(problem)
    index = problem.index
    for q in pods:
        pod = problem.pods[q]
        best: tuple[tuple[int, int], int] | None = None
        for node in index.pod_nodes[q]:
            taken = layout.place(pod, node, layout_order, smallest=True)
            if taken is None:
                continue
            cost = _cost(layout, taken)
            layout.undo(taken)
            if best is None or cost < best[0]:
                best = (cost, node)
        if best is not None:
            taken = layout.place(pod, best[1], layout_order, smallest=True)
            if taken is not None:  # the same search again: it finds the same devices
                layout.keep(taken)
    return layout


def _pod_size(layout: Layout, pod: MigPod) -> float:
    """Share of a GPU the pod's smallest alternatives take (:meth:`Layout.share`, summed)."""
    return sum(
        min(layout.share(alt.profile, alt.count) for alt in request.alternatives)
        for claim in pod.claims
        for request in claim.requests
    )


def _sizes(problem: MigProblem) -> list[float]:
    """:func:`_pod_size` of every pod (``inf`` for a pod asking a profile no GPU has)."""
    layout = Layout(problem)
    return [_pod_size(layout, pod) for pod in problem.pods]


def _improve(problem: MigProblem, picks: list[MigPick], deadline: Deadline) -> list[MigPick]:
    """Repack: for each pod left out, per node, place it first and the node's pods after it
    (largest first), or all of them largest first; keep the result when the score rises
    (at most :data:`REPACKS` repacks, and none after ``deadline``)."""
    best = list(picks)
    best_score = evaluate(problem, best).score
    index = problem.index
    claim_pod = {claim.id: q for q, pod in enumerate(problem.pods) for claim in pod.claims}
    sizes = _sizes(problem)
    tries = 0
    for q in range(len(problem.pods)):
        served = {claim_pod[pick.claim] for pick in best}
        if q in served:
            continue
        for node in index.pod_nodes[q]:
            here = {
                claim_pod[pick.claim]
                for pick in best
                if index.node[index.device_of[pick.device]] == node
            }
            kept = [pick for pick in best if claim_pod[pick.claim] not in here]
            others = sorted(here, key=lambda k: -sizes[k])
            rest = [k for k in range(len(problem.pods)) if k not in served and k != q]
            together = sorted([q, *here], key=lambda k: (-sizes[k], k))
            improved = False
            for order in ([q, *others, *rest], [*together, *rest]):
                tries += 1
                if tries > REPACKS or deadline.expired():
                    return best
                layout = Layout(problem)
                for pick in kept:
                    layout.take(index.device_of[pick.device])
                layout.picks = list(kept)
                _greedy(problem, order, layout)
                score = evaluate(problem, layout.picks).score
                if score > best_score:
                    best, best_score, improved = layout.picks, score, True
                    break
            if improved:
                break
    return best


def _replace(problem: MigProblem, picks: list[MigPick], deadline: Deadline) -> list[MigPick]:
    """Move: each served pod in turn is taken out and placed again where the whole answer
    scores best (a pod of one device: every free device of its profiles is tried; else the
    greedy's devices on each node); kept when the score rises. Two passes (none after
    ``deadline``)."""
    index = problem.index
    claim_pod = {claim.id: q for q, pod in enumerate(problem.pods) for claim in pod.claims}
    best = list(picks)
    best_score = evaluate(problem, best).score
    for _ in range(2):
        moved = False
        for q, pod in enumerate(problem.pods):
            if deadline.expired():
                return best
            mine = [pick for pick in best if claim_pod[pick.claim] == q]
            if not mine:
                continue
            others = [pick for pick in best if claim_pod[pick.claim] != q]
            layout = Layout(problem)
            for pick in others:
                layout.take(index.device_of[pick.device])
            options: list[list[MigPick]] = []
            single = len(pod.claims) == 1 and len(pod.claims[0].requests) == 1
            request = pod.claims[0].requests[0]
            if single and all(alt.count == 1 for alt in request.alternatives):
                for node in index.pod_nodes[q]:
                    for alternative in request.alternatives:
                        for p in index.free.get((node, alternative.profile), []):
                            if layout.fits(p):
                                name = request.alternative_name(alternative)
                                options.append(
                                    [
                                        MigPick(
                                            claim=pod.claims[0].id,
                                            request=name,
                                            device=index.keys[p],
                                        )
                                    ]
                                )
            else:
                for node in index.pod_nodes[q]:
                    taken = layout.place(pod, node, layout_order, smallest=True)
                    if taken is not None:
                        layout.undo(taken)
                        options.append(
                            [
                                MigPick(claim=claim, request=name, device=index.keys[p])
                                for claim, name, p in taken
                            ]
                        )
            for option in options:
                trial = others + option
                score = evaluate(problem, trial).score
                if score > best_score:
                    best, best_score, moved = trial, score, True
        if not moved:
            break
    order = {pod.id: q for q, pod in enumerate(problem.pods)}
    return sorted(best, key=lambda pick: order[problem.pods[claim_pod[pick.claim]].id])


def solve_first_fit(problem: MigProblem) -> MigResult:
    """First fit, as Kubernetes' DRA allocator chooses devices today (no scoring).

    Examples
    --------
    >>> from gpuopt.mig.generator import random_problem
    >>> problem = random_problem(1)
    >>> result = solve_first_fit(problem)
    >>> from gpuopt.mig.solution import violations
    >>> violations(problem, result)
    []
    """
    started = time.perf_counter()
    picks = _first_fit(problem)
    return _heuristic_result(problem, "first-fit", picks, started)


def _heuristic_result(
    problem: MigProblem, method: str, picks: Sequence[MigPick], started: float
) -> MigResult:
    """The answer of the heuristic ``method`` (with the note that says it proves no
    bound), timed from ``started`` (``time.perf_counter``)."""
    seconds = time.perf_counter() - started
    return make_result(problem, method, picks, seconds=seconds, notes=[heuristic_note(method)])


def solve_heuristic(problem: MigProblem, *, improve: bool = True) -> MigResult:
    """The MIG layout heuristic (see the module docstring); never below first fit.

    Parameters
    ----------
    problem
        The GPUs and the waiting pods.
    improve
        Whether to run the local improvements (repacking a node with a pod left out,
        then moving each served pod to where the answer scores best).

    Examples
    --------
    >>> from gpuopt.mig.generator import random_problem
    >>> problem = random_problem(1)
    >>> ours, first = solve_heuristic(problem), solve_first_fit(problem)
    >>> ours.metrics.weight_served >= first.metrics.weight_served
    True
    """
    return warm_start(problem, improve=improve, deadline=Deadline(None))


def warm_start(problem: MigProblem, *, improve: bool, deadline: Deadline) -> MigResult:
    """:func:`solve_heuristic`, its improvements stopped at ``deadline`` at the latest (an
    exact method's time limit, whose warm start it is; without a limit their counts alone
    bound them). Past the deadline it is its constructions' best, never below first fit."""
    started = time.perf_counter()
    arrival = list(range(len(problem.pods)))
    sizes = _sizes(problem)
    largest = sorted(arrival, key=lambda q: (-problem.pods[q].weight, -sizes[q], q))
    candidates = [_first_fit(problem)]
    for order in (arrival, largest):
        candidates.append(_greedy(problem, order).picks)
    best = max(candidates, key=lambda picks: evaluate(problem, picks).score)
    if improve:
        best = _replace(problem, _improve(problem, best, deadline), deadline)
    return _heuristic_result(problem, "heuristic", best, started)


__all__ = [
    "REPACKS",
    "WORK_LIMIT",
    "Layout",
    "layout_order",
    "slice_order",
    "solve_first_fit",
    "solve_heuristic",
    "warm_start",
]
