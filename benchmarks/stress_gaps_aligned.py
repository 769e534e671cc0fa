"""Prototype of an aligned-block clearing move for the stress gaps of issue 32 (scratch).

The "rules" gaps at 64 GPUs with ``align_blocks`` (aligned-running-low-64-s0,
big-jobs-64-s10, docs/stress-gaps.md section 2) come from small tasks that
break the aligned block a big task needs a few steps later. This script adds
one more ruin kind to the search of ``models/allocation.md`` section 10.1,
patched from the outside on the pure-Python greedy (``GPUOPT_PURE_PYTHON=1``,
set by ``stress_gaps_proto``; nothing in ``gpuopt/`` changes): with
probability :data:`SHARE` a round takes a task of at least :data:`MIN_SIZE`
GPUs that is left out or starts after its arrival, picks an earlier start and
an aligned block where it could run, frees every movable task overlapping the
aligned block of ``WIDEN`` times its size around it over its steps (and the
task itself), places the task there first and re-places the rest in the
round's order (best fit, as every placement). The round is kept, as every
round, when the objective does not fall.

Variants (``--variant``; ``-none``: no work limit): ``clearK`` the clearing
round with the block widened K times; ``pack`` a buddy-style block choice in
every placement (the free block whose enclosing aligned blocks of 2, 4, ...
times its size are the most used over its steps), ``pack-aligned`` the same
only with ``align_blocks``, ``clear2-pack`` both; ``clear2-packc`` the
packing choice only in a clearing round's recreate; ``portfolio`` each
order's plan built with both block choices, the better kept; ``roomK`` the
make-room pass's windows widened to the aligned block of K times the
mover's size (movers of at least :data:`MIN_SIZE` GPUs); ``reseed-K`` the
search started again from its best plan with a new seed after K rounds
without a better one (``reseed0`` gives today's plans). Figures:
docs/stress-gaps.md, section "2026-12-06 (evening)".

    python benchmarks/stress_gaps_aligned.py out/g1-big.json --worst 10 \\
        --variant auto,clear1,clear2,pack,clear2-pack --json out/aligned-10.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ["GPUOPT_PURE_PYTHON"] = "1"  # before gpuopt is imported

import stress_gaps_proto as proto

from gpuopt.allocation import _construction, _search
from gpuopt.allocation._construction import _lowest_bits

#: Share of ruin rounds that clear an aligned block (when a task qualifies).
SHARE = 0.3
#: Smallest task (GPUs) a clearing round is made for.
MIN_SIZE = 4
#: The freed block is this many times the task's size (aligned), capped at the cluster.
WIDEN = [1]

_original_ruin = _search._ruin


def _clearing(
    board: Any, pending: list[int], rng: random.Random
) -> tuple[list[int], list[int], tuple[int, int, int] | None] | None:
    """An aligned block cleared for a big task left out or started late; None when no
    task qualifies."""
    batch, gpus, horizon = board.batch, board.gpus, board.horizon
    candidates = []
    for u in pending:
        if batch.size[u] < MIN_SIZE:
            continue
        now = board.starts.get(u)
        if now is not None and now[0] <= batch.arrival[u]:
            continue
        latest = horizon if now is None else now[0] - 1
        ways = [w for w in board.variants(u) if min(w[1], latest) >= batch.arrival[u]]
        if ways:
            candidates.append((u, ways, latest))
    if not candidates:
        return None
    u, ways, latest = rng.choice(candidates)
    arrival = batch.arrival[u]
    steps_u, last, legal, _rate = rng.choice(ways)
    last = min(last, latest)
    start = arrival + int(rng.random() ** 2 * (last - arrival + 1))
    first = rng.choice(_lowest_bits(legal, gpus))
    size = batch.size[u]
    width = min(gpus, WIDEN[0] * size)
    lo = first - first % width
    hi = max(lo + width, first + size)
    end = min(horizon, start + steps_u)
    removed = []
    for b in sorted(board.starts):
        if batch.running[b]:
            continue
        if b == u:
            removed.append(b)
            continue
        begin, at = board.starts[b]
        stop = board.end_of(b, begin, at)
        if begin < end and stop > start and at < hi and at + batch.size[b] > lo:
            removed.append(b)
    return removed, [], (u, start, first)


def _ruin(
    board: Any, pending: list[int], rng: random.Random
) -> tuple[list[int], list[int], tuple[int, int, int] | None]:
    """:func:`_search._ruin`, or with probability :data:`SHARE` an aligned block cleared."""
    CLEARING[0] = False
    if rng.random() < SHARE:
        found = _clearing(board, pending, rng)
        if found is not None:
            CLEARING[0] = True
            return found
    return _original_ruin(board, pending, rng)


#: Whether the packing block choice is on: "all" (every placement), "clear" (only in
#: the recreate of a clearing round), "" (never).
PACK = [""]
#: Set by :func:`_clearing`, cleared by the next ruin or at the end of the search.
CLEARING = [False]

_original_choose = _construction._choose_block
_original_rr = _search._ruin_and_recreate


def _packing_block(board: Any, firsts: int, free: int, size: int, start: int, end: int) -> int:
    """Buddy-style best fit: the free block whose enclosing aligned blocks of 2, 4, ...
    times its size are the most used over ``[start, end)`` (the smallest level first),
    so that a small task keeps out of the free aligned blocks a big task needs; ties:
    :func:`_construction._choose_block`'s choice first, then the lower GPU."""
    on = PACK[0] == "all" or (PACK[0] == "aligned" and board.index.align)
    if firsts & (firsts - 1) == 0 or not (on or (PACK[0] == "clear" and CLEARING[0])):
        return _original_choose(board, firsts, free, size, start, end)
    used = 0
    for t in range(start, end):
        used |= board.busy[t]
    default = _original_choose(board, firsts, free, size, start, end)
    levels = []
    width = 2 * size
    while width <= board.gpus:
        levels.append(width)
        width *= 2
    best, chosen = None, default
    for first in _lowest_bits(firsts, board.gpus):
        score = []
        for width in levels:
            lo = first - first % width
            score.append(((used >> lo) & ((1 << width) - 1)).bit_count())
        key = (tuple(score), first == default, -first)
        if best is None or key > best:
            best, chosen = key, first
    return chosen


def _rr(*args: Any, **kwargs: Any) -> Any:
    try:
        return _original_rr(*args, **kwargs)
    finally:
        CLEARING[0] = False


def _clear(widen: int, pack: str = "", share: float = 0.3) -> Callable[[], Any]:
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        global SHARE
        saved = WIDEN[0], PACK[0], SHARE
        WIDEN[0], PACK[0], SHARE = widen, pack, share
        try:
            with (
                proto.patched(
                    _search, _ruin=_ruin if widen else _original_ruin, _ruin_and_recreate=_rr
                ),
                proto.patched(_construction, _choose_block=_packing_block),
            ):
                yield
        finally:
            WIDEN[0], PACK[0], SHARE = saved

    return entered


_original_victims = _search._victims


def _wide_victims(
    board: Any, start: int, end: int, lo: int, hi: int, mover: int, keep: int = -1
) -> list[int] | None:
    """:func:`_search._victims` over the aligned block of ``WIDEN`` times the mover's size
    around ``[lo, hi)`` (movers of at least :data:`MIN_SIZE` GPUs): the make-room pass
    then clears that block, not only the mover's window."""
    size = hi - lo
    if size >= MIN_SIZE:
        width = min(board.gpus, WIDEN[0] * size)
        lo, hi = lo - lo % width, max(lo - lo % width + width, hi)
    return _original_victims(board, start, end, lo, hi, mover, keep)


def _room_wide(widen: int) -> Callable[[], Any]:
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        saved = WIDEN[0]
        WIDEN[0] = widen
        try:
            with proto.patched(_search, _victims=_wide_victims):
                yield
        finally:
            WIDEN[0] = saved

    return entered


#: How many times a stalled search starts again from its best plan with a new seed.
RESEEDS = [3]
#: Rounds without a better plan after which the search starts again with a new seed.
RESEED_AFTER = [100]


def _reseeding_rr(
    board: Any,
    pending: list[int],
    rounds: int,
    seed: int,
    shown: Any = None,
    label: str = "",
) -> Any:
    """:func:`_search._ruin_and_recreate` where a stall (``STALL_ROUNDS`` rounds without a
    better plan) starts again from the best plan with the seed ``seed + k`` (up to
    :data:`RESEEDS` times) instead of ending the search, while its placements last; the
    rounds' count is shared."""
    from gpuopt.allocation._construction import TRADE_BUDGET, _place_at, _place_earliest

    rng = random.Random(seed)
    budget = _search._scaled(_search.SEARCH_WORK, board)
    if budget < 1:
        return board
    most = {b: _search._best_value(board, b) for b in pending}
    best, placements = _search._make_room(board, pending, budget // 2)
    current = best
    stalled = reseeds = 0
    for _ in range(rounds):
        if stalled >= RESEED_AFTER[0] and reseeds < RESEEDS[0]:
            reseeds += 1
            rng, current, stalled = random.Random(seed + reseeds), best, 0
        if placements >= budget or stalled >= _search.STALL_ROUNDS or board.budget.spent():
            break
        if _search._at_best(current, most):
            break
        stalled += 1
        trial = current.copy()
        removed, last, target = _search._ruin(trial, pending, rng)
        for b in removed:
            trial.remove(b)
        _search._refresh_realtime(trial)
        trial.trade_budget = 2 * TRADE_BUDGET
        if target is not None:
            _place_at(trial, *target)
        offer = [b for b in pending if b not in trial.starts and b not in last]
        for b in [*_search._recreate_order(trial, offer, rng), *last]:
            _place_earliest(trial, b, trade=True, trade_starts=trial.horizon)
        placements += len(offer) + len(last)
        if trial.objective >= current.objective - 1e-9:
            current = trial
            if trial.objective > best.objective + 1e-9:
                best, stalled = trial, 0
    return best


def _reseed(times: int, after: int = 100) -> Callable[[], Any]:
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        saved = RESEEDS[0], RESEED_AFTER[0]
        RESEEDS[0], RESEED_AFTER[0] = times, after
        try:
            with proto.patched(_search, _ruin_and_recreate=_reseeding_rr):
                yield
        finally:
            RESEEDS[0], RESEED_AFTER[0] = saved

    return entered


def _portfolio() -> Any:
    """Each order's plan built twice, with the default block choice and the packing one;
    the better kept (the search then runs with the default choice)."""
    from gpuopt.allocation import greedy as greedy_module

    original = greedy_module._Steps.construct

    def construct(self: Any, order: list[int], shown: Any) -> Any:
        found = original(self, order, shown)
        PACK[0] = "all"
        try:
            packed = original(self, order, shown)
        finally:
            PACK[0] = ""
        return packed if packed.objective > found.objective + 1e-9 else found

    return _both_ctx(
        _clear(0, ""), lambda: proto.patched(greedy_module._Steps, construct=construct)
    )


def _both_ctx(*managers: Callable[[], Any]) -> Any:
    stack = contextlib.ExitStack()

    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with stack:
            for manager in managers:
                stack.enter_context(manager())
            yield

    return entered()


proto.VARIANTS.update(
    {
        "clear1": (_clear(1), "auto"),
        "clear2": (_clear(2), "auto"),
        "clear1-none": (_clear(1), None),
        "clear2-none": (_clear(2), None),
        "pack": (_clear(0, "all"), "auto"),
        "pack-none": (_clear(0, "all"), None),
        "pack-aligned": (_clear(0, "aligned"), "auto"),
        "portfolio": (_portfolio, "auto"),
        "room2": (_room_wide(2), "auto"),
        "room2-none": (_room_wide(2), None),
        "room4": (_room_wide(4), "auto"),
        "reseed0": (_reseed(0), "auto"),
        "reseed3": (_reseed(3), "auto"),
        "reseed3-none": (_reseed(3), None),
        "reseed-20": (_reseed(100, 20), "auto"),
        "reseed-30": (_reseed(100, 30), "auto"),
        "reseed-20-none": (_reseed(100, 20), None),
        "portfolio-none": (_portfolio, None),
        "clear2-pack": (_clear(2, "all"), "auto"),
        "clear2-pack-none": (_clear(2, "all"), None),
        "clear2-packc": (_clear(2, "clear"), "auto"),
        "clear1-packc": (_clear(1, "clear"), "auto"),
        "clear2-packc-none": (_clear(2, "clear"), None),
        "clear2-s1": (_clear(2, "", 0.1), "auto"),
        "clear2-packc-s1": (_clear(2, "clear", 0.1), "auto"),
    }
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="a saved allocation_stress.py --json run (or .jsonl)")
    parser.add_argument("--worst", type=int, default=10, help="the K largest gaps (0: all)")
    parser.add_argument("--variant", default="auto,clear1,clear2")
    parser.add_argument("--json", help="write the per-instance figures here")
    args = parser.parse_args()
    rows = proto.load(args.runs)
    rows = sorted(rows, key=lambda row: -row["old_gap"])[: args.worst or None]
    results = []
    print("| variant | mean gap | max gap | gap > 3 % | gap > 5 % | median work | max work |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in args.variant.split(","):
        found = proto.score(rows, name)
        results.append(found)
        print(
            f"| {name} | {found['mean']:.2%} | {found['max']:.2%} | {found['above3']} | "
            f"{found['above5']} | {found['median_work']:,.0f} | {found['max_work']:,} |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
