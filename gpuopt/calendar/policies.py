"""The textbook queue policies of a job-trace replay: ``fifo``, ``easy`` and ``conservative``.

All three decide on one :class:`Profile`: for every node, the GPUs in use
from now on as a step function of time, built from what the scheduler knows
(rules in ``models/calendar.md``): a running job holds its GPUs until its
start plus its walltime (R4: the scheduler sees walltimes, not runtimes), a
reservation holds them over ``[start, start + walltime)``. A job of ``g <=
G`` GPUs needs ``g`` GPUs of one node, a larger one ``ceil(g / G)`` whole
nodes (R3). :meth:`Profile.place` finds the earliest time, from now, at which
a job fits for its whole walltime, and its nodes (R7: best fit — the node
with the fewest free GPUs at that time that fits, ties the lowest index;
whole nodes: the lowest indices that are free over the window).

The policies (R6), each at every decision time ``now``, over the waiting
jobs in submit order:

``fifo``
    Start jobs from the head of the queue while the head fits now; stop at
    the first that does not (no backfill).
``easy``
    As ``fifo`` until the head does not fit; the head then holds a
    reservation at its earliest start (computed from the walltimes of the
    running jobs), and every later job that fits now, for its whole walltime,
    beside that reservation starts now (it either ends by walltime before the
    head's start or leaves the head's GPUs alone). Only the head holds a
    reservation; it is recomputed at every decision.
``conservative``
    Every waiting job holds a reservation, made when it is submitted at its
    earliest start beside all earlier ones; a job starts when its
    reservation's time comes. When a running job ends before its walltime,
    the reservations are compressed in submit order: each moves to its
    earliest start if that is earlier than its reserved one (else it keeps
    its start and nodes), so no reservation ever moves later and no earlier
    reservation is delayed.

Everything is deterministic: ties are broken by submit order and node index.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from gpuopt.calendar.greedy import order, place_all, split_piece
from gpuopt.calendar.problem import CalendarIndex

#: A queue policy of a job-trace replay (R6 of models/calendar.md).
Policy = Literal["fifo", "easy", "conservative", "calendar"]
#: The policies a replay knows, in the order the CLI lists them.
POLICIES: tuple[Policy, ...] = ("fifo", "easy", "conservative", "calendar")


class Profile:
    """GPUs in use on each node from ``now`` on, as step functions.

    For node ``n``, ``used[n][i]`` GPUs are in use over ``[times[n][i],
    times[n][i + 1])`` and ``used[n][-1]`` from ``times[n][-1]`` on; every
    breakpoint is a change (neighbouring pieces differ).

    >>> profile = Profile(2, 8)
    >>> profile.hold((0,), 0.0, 10.0, 6)
    >>> profile.place(4, 1, 5.0, now=0.0)   # node 1 is free: 4 GPUs fit there now
    (0.0, (1,))
    >>> profile.hold((1,), 0.0, 20.0, 8)
    >>> profile.place(4, 1, 5.0, now=0.0)   # the earliest is node 0 at 10
    (10.0, (0,))
    """

    __slots__ = ("gpus_per_node", "times", "used")

    def __init__(self, node_count: int, gpus_per_node: int) -> None:
        self.gpus_per_node = gpus_per_node
        self.times: list[list[float]] = [[-math.inf] for _ in range(node_count)]
        self.used: list[list[int]] = [[0] for _ in range(node_count)]

    # ------------------------------------------------------------------ changes
    def _split(self, node: int, at: float) -> int:
        """The index of the piece of ``node`` that starts at ``at`` (made if needed)."""
        return split_piece(self.times[node], self.used[node], at)

    def _merge(self, node: int, at: float) -> None:
        """Drop the breakpoint at ``at`` of ``node`` if it no longer changes anything."""
        times, used = self.times[node], self.used[node]
        index = bisect_left(times, at)
        if 0 < index < len(times) and times[index] == at and used[index] == used[index - 1]:
            del times[index]
            del used[index]

    def hold(self, nodes: Sequence[int], start: float, end: float, gpus: int) -> None:
        """Count ``gpus`` more in use on each of ``nodes`` over ``[start, end)``."""
        self._add(nodes, start, end, gpus)

    def release(self, nodes: Sequence[int], start: float, end: float, gpus: int) -> None:
        """Count ``gpus`` fewer in use on each of ``nodes`` over ``[start, end)``."""
        self._add(nodes, start, end, -gpus)

    def _add(self, nodes: Sequence[int], start: float, end: float, gpus: int) -> None:
        if end <= start:
            return
        for node in nodes:
            first = self._split(node, start)
            last = self._split(node, end)
            used = self.used[node]
            for index in range(first, last):
                used[index] += gpus
            self._merge(node, end)
            self._merge(node, start)

    def forget_before(self, now: float) -> None:
        """Drop the pieces that end at or before ``now`` (the past cannot change)."""
        for times, used in zip(self.times, self.used, strict=True):
            index = bisect_right(times, now) - 1
            if index > 0:
                del times[:index]
                del used[:index]

    # ------------------------------------------------------------------ queries
    def free_now(self, node: int, now: float) -> int:
        """Free GPUs of ``node`` at ``now``."""
        times = self.times[node]
        return self.gpus_per_node - self.used[node][bisect_right(times, now) - 1]

    def _earliest_on(
        self, node: int, gpus: int, duration: float, now: float, latest: float
    ) -> tuple[float, int]:
        """The earliest time in ``[now, latest]`` at which ``gpus`` GPUs of ``node`` are free
        for ``duration``, and the GPUs in use then; ``(inf, 0)`` when there is none."""
        times, used = self.times[node], self.used[node]
        most = self.gpus_per_node - gpus
        count = len(times)
        index = bisect_right(times, now) - 1
        while index < count:
            start = now if times[index] < now else times[index]
            if start > latest:
                break
            if used[index] > most:
                index += 1
                continue
            end = start + duration
            ahead = index + 1
            while ahead < count and times[ahead] < end:
                if used[ahead] > most:
                    break
                ahead += 1
            else:
                return start, used[index]
            index = ahead + 1
        return math.inf, 0

    def _free_windows(self, node: int, duration: float, now: float) -> list[tuple[float, float]]:
        """The windows ``[a, b)`` from ``now`` on where ``node`` is wholly free, at least
        ``duration`` long."""
        times, used = self.times[node], self.used[node]
        windows: list[tuple[float, float]] = []
        index = bisect_right(times, now) - 1
        count = len(times)
        while index < count:
            if used[index]:
                index += 1
                continue
            start = max(times[index], now)
            index += 1
            end = times[index] if index < count else math.inf
            if end - start >= duration:
                windows.append((start, end))
        return windows

    def place(
        self,
        gpus: int,
        width: int,
        duration: float,
        *,
        now: float,
        latest: float = math.inf,
        among: Sequence[int] | None = None,
    ) -> tuple[float, tuple[int, ...]]:
        """Where and when a job fits first, for its whole ``duration``, from ``now`` on.

        Parameters
        ----------
        gpus
            GPUs on each node it uses: its GPUs on one node, ``gpus_per_node``
            on whole nodes.
        width
            Nodes it uses (1, or ``ceil(g / G)`` whole nodes).
        duration
            Seconds it holds them (its walltime).
        now, latest
            The window of start times searched.
        among
            For a one-node job, the nodes searched (None: all).

        Returns
        -------
        tuple
            ``(start, nodes)``; ``(inf, ())`` when it fits nowhere by ``latest``.
        """
        node_count = len(self.times)
        if width == 1:
            best: tuple[float, int, int] = (math.inf, 0, -1)
            most = self.gpus_per_node - gpus
            for node in range(node_count) if among is None else among:
                if (
                    latest <= now
                    and self.used[node][bisect_right(self.times[node], now) - 1] > most
                ):
                    continue  # only "now" is asked, and the node is too full now
                start, in_use = self._earliest_on(node, gpus, duration, now, min(latest, best[0]))
                if (start, -in_use) < best[:2]:
                    best = (start, -in_use, node)
            return (best[0], (best[2],)) if best[2] >= 0 else (math.inf, ())
        # Node n can start the job at s if s is in [a, b - duration] for one of its free
        # windows [a, b): sweep those intervals of starts for the first s that `width`
        # nodes share (a node's windows are disjoint, so it counts once).
        changes: list[tuple[float, int, int]] = []
        windows = [self._free_windows(node, duration, now) for node in range(node_count)]
        for node in range(node_count):
            for start, end in windows[node]:
                changes.append((start, 0, node))  # opens before closes at the same time
                changes.append((end - duration, 1, node))
        changes.sort()
        open_count = 0
        for at, closing, _ in changes:
            if at > latest:
                break
            if closing:
                open_count -= 1
                continue
            open_count += 1
            if open_count >= width:
                chosen = [
                    node
                    for node in range(node_count)
                    if any(a <= at <= b - duration for a, b in windows[node])
                ]
                return at, tuple(chosen[:width])
        return math.inf, ()


class Scheduler:
    """The waiting jobs and one policy's decisions on a :class:`Profile`.

    Parameters
    ----------
    policy
        ``"fifo"``, ``"easy"`` or ``"conservative"`` (the module docstring says how each decides).
    node_count, gpus_per_node
        The cluster: ``node_count`` nodes of ``gpus_per_node`` GPUs.
    per_node, width, walltime
        Per job (by index, in submit order): GPUs on each of its nodes, its
        number of nodes, and the walltime the scheduler sees.
    """

    def __init__(
        self,
        policy: Policy,
        node_count: int,
        gpus_per_node: int,
        per_node: Sequence[int],
        width: Sequence[int],
        walltime: Sequence[float],
        submit: Sequence[float] | None = None,
        horizon: float = 7 * 86400.0,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}.")
        self.policy = policy
        self.node_count = node_count
        self.gpus_per_node = gpus_per_node
        self.per_node = per_node
        self.width = width
        self.walltime = walltime
        self.profile = Profile(node_count, gpus_per_node)
        #: Waiting jobs, in submit order.
        self.queue: list[int] = []
        #: conservative: each waiting job's reservation, ``(start, nodes, version)``: the
        #: version is :attr:`_version` when its start was last found to be the earliest.
        self.reserved: dict[int, tuple[float, tuple[int, ...], int]] = {}
        #: A count of the releases of GPUs before their planned time, and per node the
        #: count at its last release: a node not released since a one-node job's
        #: reservation was last found the earliest holds at least as much as then, so
        #: it cannot offer that job an earlier start (compression skips it).
        self._version = 0
        self._released = [0] * node_count
        self._new: list[int] = []
        self._compress = False
        #: calendar: the submit times, the horizon (seconds), the running jobs' (start, nodes);
        #: every policy: per waiting job the start its last plan gave it (holds made and
        #: broken, R8).
        self.submit_times = submit
        self.horizon = horizon
        self.running: dict[int, tuple[float, tuple[int, ...]]] = {}
        self.planned: dict[int, float] = {}
        #: Per job the start it was first planned at (when it did not start at once).
        self.first_planned: dict[int, float] = {}
        self.holds_made = 0
        self.holds_broken = 0
        self._node_ids: tuple[str, ...] | None = None
        self._capacity: Any = None

    def submit(self, job: int) -> None:
        """``job`` joins the queue (jobs are submitted in index order)."""
        self.queue.append(job)
        self._new.append(job)

    def end(self, job: int, now: float, start: float, nodes: Sequence[int]) -> None:
        """``job``, started at ``start`` on ``nodes``, ends at ``now``: the rest of its
        walltime comes free (and, for ``conservative``, the reservations are compressed)."""
        self.running.pop(job, None)
        planned = start + self.walltime[job]
        if now < planned:
            self.profile.release(nodes, now, planned, self.per_node[job])
            self._mark_released(nodes)
            self._compress = True

    def decide(self, now: float) -> tuple[list[tuple[int, tuple[int, ...]]], list[float]]:
        """The jobs that start at ``now`` with their nodes, in submit order, and the
        future times at which a reservation starts (when to decide again)."""
        self.profile.forget_before(now)
        if self.policy == "conservative":
            started = self._conservative(now)
            wakes = sorted({start for start, _, _ in self.reserved.values()})
        elif self.policy == "calendar":
            started, wakes = self._calendar(now)
        else:
            started = self._in_order(now, backfill=self.policy == "easy")
            wakes = []
        self._new.clear()
        self._compress = False
        if started:
            done = {job for job, _ in started}
            self.queue = [job for job in self.queue if job not in done]
            for job in done:
                self.planned.pop(job, None)
        return started, wakes

    def _start(self, job: int, now: float, nodes: tuple[int, ...]) -> None:
        self.profile.hold(nodes, now, now + self.walltime[job], self.per_node[job])

    def _free_now(self, now: float) -> tuple[int, int]:
        """The most free GPUs of a node now, and the nodes wholly free now."""
        free = [self.profile.free_now(node, now) for node in range(self.node_count)]
        return max(free), free.count(self.gpus_per_node)

    def _fits_now(self, job: int, now: float) -> tuple[int, ...]:
        """The nodes on which ``job`` starts now for its whole walltime, or ()."""
        start, nodes = self.profile.place(
            self.per_node[job], self.width[job], self.walltime[job], now=now, latest=now
        )
        return nodes if start == now else ()

    def _in_order(self, now: float, *, backfill: bool) -> list[tuple[int, tuple[int, ...]]]:
        """``fifo`` (and ``easy`` with ``backfill``): R6a and R6b of models/calendar.md."""
        started: list[tuple[int, tuple[int, ...]]] = []
        profile = self.profile
        head: tuple[int, float, tuple[int, ...]] | None = None
        most_free, whole_free = self._free_now(now)
        # (GPUs on a node, nodes, walltime) of jobs that did not fit now: the profile only
        # fills up during one decision, so a job that asks as much or more for as long or
        # longer does not fit either.
        refused: list[tuple[int, int, float]] = []
        for job in self.queue:
            per_node, width, duration = self.per_node[job], self.width[job], self.walltime[job]
            if (
                (width == 1 and per_node > most_free)
                or (width > 1 and width > whole_free)
                or any(per_node >= g and width >= w and duration >= d for g, w, d in refused)
            ):
                nodes: tuple[int, ...] = ()
            else:
                nodes = self._fits_now(job, now)
                if not nodes:
                    refused.append((per_node, width, duration))
            if nodes:
                self._start(job, now, nodes)
                started.append((job, nodes))
                most_free, whole_free = self._free_now(now)
                continue
            if not backfill:
                break
            if head is None:
                start, held = profile.place(per_node, width, self.walltime[job], now=now)
                profile.hold(held, start, start + self.walltime[job], per_node)
                head = (job, start, held)
                if start > now:
                    self._planned_at(job, start)
        if head is not None:
            job, start, held = head
            profile.release(held, start, start + self.walltime[job], self.per_node[job])
        return started

    def _calendar(self, now: float) -> tuple[list[tuple[int, tuple[int, ...]]], list[float]]:
        """``calendar``: the calendar's heuristic re-plans every waiting job (R6d).

        Ticks are seconds from ``now``; a running job holds its nodes until its
        start plus its walltime, rounded up to a whole second; a waiting job's
        submit tick is minus its wait so far (the heuristic's order reads it).
        """
        gpus = self.gpus_per_node
        if self._node_ids is None:
            self._node_ids = tuple(f"n{n}" for n in range(self.node_count))
            self._capacity = np.full((self.node_count, 1), gpus, dtype=np.int64)
        run_node, run_use, run_end = [], [], []
        for job, (start, held) in self.running.items():
            end = math.ceil(start + self.walltime[job] - now)
            for node in held:
                run_node.append(node)
                run_use.append((self.per_node[job],))
                run_end.append(end)
        submit = self.submit_times or [0.0] * len(self.walltime)
        queue = self.queue
        duration = [max(1, math.ceil(self.walltime[job])) for job in queue]
        index = CalendarIndex.of(
            node_ids=self._node_ids,
            capacity=self._capacity,
            run_node=run_node,
            run_use=run_use,
            run_end=run_end,
            job_ids=tuple(str(job) for job in queue),
            use=[(self.per_node[job],) for job in queue],
            duration=duration,
            members=[self.width[job] for job in queue],
            submit=[-math.floor(now - submit[job]) for job in queue],
            priority=[0] * len(queue),
            weight=[1.0] * len(queue),
            eligible=[None] * len(queue),
            levels=[None] * len(queue),
            domains=[None] * len(queue),
            horizon=max(1, math.ceil(self.horizon)),
        )
        placed = place_all(index, order(index))
        started: list[tuple[int, tuple[int, ...]]] = []
        wakes: list[float] = []
        for position, job in enumerate(queue):
            tick, nodes = placed[position]
            if tick < 0:
                continue
            at = now + tick
            if tick == 0:
                started.append((job, nodes))
                self.running[job] = (now, nodes)
                self.planned.pop(job, None)
                self.profile.hold(nodes, now, now + self.walltime[job], self.per_node[job])
                continue
            self._planned_at(job, at)
        # No wake-ups: a planned start is a time at which capacity comes free, which is the
        # end of a running job's walltime (its end event, or earlier) or the end of a job
        # planned before it (which starts at an event): every one is an event already.
        started.sort()
        return started, wakes

    def _planned_at(self, job: int, at: float) -> None:
        """Count a hold: made when ``job`` is first planned to start at ``at`` > now,
        broken when a later decision plans it later than last planned (R8)."""
        before = self.planned.get(job)
        if before is None:
            self.holds_made += 1
            self.first_planned[job] = at
        elif at > before + 1e-6:
            self.holds_broken += 1
        self.planned[job] = at

    def _mark_released(self, nodes: Sequence[int]) -> None:
        self._version += 1
        for node in nodes:
            self._released[node] = self._version

    def _conservative(self, now: float) -> list[tuple[int, tuple[int, ...]]]:
        """``conservative``: R6c of models/calendar.md.

        Compression takes each reservation out in submit order and puts it back at its
        earliest start if that is earlier; otherwise it keeps its start and its nodes.
        A one-node job searches only the nodes released since its start was last the
        earliest (:attr:`_released`), and its own: the others cannot do better.
        """
        profile = self.profile
        if self._compress:
            for job in self.queue:
                if job not in self.reserved:
                    continue
                start, nodes, version = self.reserved[job]
                duration, per_node, width = self.walltime[job], self.per_node[job], self.width[job]
                released = [n for n, at in enumerate(self._released) if at > version]
                if not released:
                    continue  # nothing released since its start was the earliest
                among = sorted({*released, *nodes}) if width == 1 else None
                profile.release(nodes, start, start + duration, per_node)
                earlier: float = math.inf
                moved: tuple[int, ...] = ()
                # Whole nodes: an earlier set must hold a released node free from before start.
                if width == 1 or any(
                    a < start for n in released for a, _ in profile._free_windows(n, duration, now)
                ):
                    earlier, moved = profile.place(
                        per_node, width, duration, now=now, latest=start, among=among
                    )
                if moved and earlier < start:
                    profile.hold(moved, earlier, earlier + duration, per_node)
                    self._mark_released(nodes)
                    self.reserved[job] = (earlier, moved, self._version)
                else:
                    profile.hold(nodes, start, start + duration, per_node)
                    self.reserved[job] = (start, nodes, self._version)
        for job in self._new:
            duration, per_node = self.walltime[job], self.per_node[job]
            start, nodes = profile.place(per_node, self.width[job], duration, now=now)
            profile.hold(nodes, start, start + duration, per_node)
            self.reserved[job] = (start, nodes, self._version)
            if start > now:
                self._planned_at(job, start)
        started = []
        for job in self.queue:
            start, nodes, _ = self.reserved[job]
            if start <= now:
                started.append((job, nodes))
                del self.reserved[job]
        return started


__all__ = ["POLICIES", "Policy", "Profile", "Scheduler"]
