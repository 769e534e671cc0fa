"""The event loop every replay shares: order, staleness, settling, determinism, empty traces."""

from __future__ import annotations

import asyncio
import random
import warnings

import pytest

from gpuopt.simulate.events import ARRIVAL, END, TICK, Event, EventQueue, Simulation, run, run_async


class Recorder(Simulation):
    """Logs every event it handles; an arrival starts a job that ends ``length`` later."""

    def __init__(self, queue: EventQueue, length: float = 0.0) -> None:
        super().__init__(queue)
        self.length = length
        self.log: list[tuple[float, str, object]] = []
        self.settled: list[float] = []
        self.stepped: list[float] = []

    def advance(self, now: float) -> None:
        self.stepped.append(now)
        super().advance(now)

    def on_arrival(self, event: Event) -> bool:
        self.log.append((event.time, event.kind, event.subject))
        if self.length:
            self.queue.push(event.time + self.length, END, event.subject)
        return True

    def on_end(self, event: Event) -> bool:
        self.log.append((event.time, event.kind, event.subject))
        return event.version == 0  # a later version is stale: nothing changes

    def on_tick(self, event: Event) -> bool:
        self.log.append((event.time, event.kind, event.subject))
        return False

    def settle(self, event: Event) -> None:
        self.settled.append(event.time)


def popped(queue: EventQueue) -> list[tuple[float, str, object]]:
    return [(event.time, event.kind, event.subject) for event in queue]


def test_time_first_then_the_kind_order_then_tie_then_push_order() -> None:
    queue = EventQueue(order=(END, ARRIVAL))
    queue.push(1.0, ARRIVAL, "a")
    queue.push(1.0, END, "b")
    queue.push(0.5, ARRIVAL, "c")
    queue.push(1.0, TICK, "d")  # not named in the order: after every named kind
    queue.push(1.0, ARRIVAL, "e", tie=(0,))
    queue.push(1.0, ARRIVAL, "f", tie=(0,))
    queue.push(1.0, ARRIVAL, "g", tie=(-1,))
    # by hand: 0.5 first; at 1.0 the end, then the arrivals by tie: () < (-1,) < (0,) as
    # tuples compare (a, g, then e and f in push order); the unnamed tick last
    assert popped(queue) == [
        (0.5, ARRIVAL, "c"),
        (1.0, END, "b"),
        (1.0, ARRIVAL, "a"),
        (1.0, ARRIVAL, "g"),
        (1.0, ARRIVAL, "e"),
        (1.0, ARRIVAL, "f"),
        (1.0, TICK, "d"),
    ]
    assert len(queue) == 0 and not queue and queue.peek() is None


def test_no_order_means_first_in_first_out_at_equal_times() -> None:
    queue = EventQueue()
    for subject, kind in enumerate([END, ARRIVAL, "lend", END, ARRIVAL]):
        queue.push(3.0, kind, subject)
    assert [subject for _, _, subject in popped(queue)] == [0, 1, 2, 3, 4]


def test_ends_before_arrivals_at_the_same_time_when_asked() -> None:
    sim = Recorder(EventQueue(order=(END, ARRIVAL)), length=1.0)
    for job, at in enumerate([0.0, 1.0, 1.0]):
        sim.queue.push(at, ARRIVAL, job)
    run(sim)
    # job 0 ends at 1.0 before jobs 1 and 2 arrive at 1.0; those end at 2.0 in arrival order
    assert sim.log == [
        (0.0, ARRIVAL, 0),
        (1.0, END, 0),
        (1.0, ARRIVAL, 1),
        (1.0, ARRIVAL, 2),
        (2.0, END, 1),
        (2.0, END, 2),
    ]
    assert sim.clock == 2.0 and sim.events == 6


def test_arrivals_first_when_the_order_says_so() -> None:
    sim = Recorder(EventQueue(order=(ARRIVAL, END)), length=1.0)
    sim.queue.push(0.0, ARRIVAL, 0)
    sim.queue.push(1.0, ARRIVAL, 1)
    run(sim)
    assert [kind for _, kind, _ in sim.log] == [ARRIVAL, ARRIVAL, END, END]


def test_settle_only_after_a_change_and_the_clock_sees_stale_events() -> None:
    sim = Recorder(EventQueue())
    sim.queue.push(1.0, ARRIVAL, "a")
    sim.queue.push(2.0, END, "a", version=3)  # stale
    sim.queue.push(3.0, TICK, None)
    sim.queue.push(4.0, END, "a")
    run(sim)
    assert sim.settled == [1.0, 4.0]
    assert sim.stepped == [1.0, 2.0, 3.0, 4.0]  # advance saw every event, the stale one too


def test_an_empty_trace_runs_no_handler_and_keeps_the_clock() -> None:
    sim = run(Recorder(EventQueue(), length=1.0))
    assert (sim.log, sim.settled, sim.stepped, sim.events, sim.clock) == ([], [], [], 0, 0.0)
    assert Simulation(EventQueue(), start=5.0).clock == 5.0
    with pytest.raises(IndexError):
        EventQueue().pop()


def test_an_unknown_kind_is_named() -> None:
    sim = Recorder(EventQueue())
    sim.queue.push(0.0, "resume", 7)
    with pytest.raises(ValueError, match="event kind 'resume' has no handler on_resume"):
        run(sim)


def test_the_order_is_deterministic_whatever_the_push_order_of_distinct_keys() -> None:
    rng = random.Random(1)
    events = [(float(rng.randrange(5)), rng.choice([END, ARRIVAL]), n) for n in range(60)]

    def drained(shuffled_seed: int) -> list[tuple[float, str, object]]:
        queue = EventQueue(order=(END, ARRIVAL))
        batch = list(events)
        random.Random(shuffled_seed).shuffle(batch)
        for at, kind, subject in batch:
            queue.push(at, kind, subject, tie=(subject,))
        return popped(queue)

    first = drained(0)
    assert all(drained(seed) == first for seed in range(1, 5))
    assert first == sorted(first, key=lambda e: (e[0], e[1] != END, e[2]))


def test_async_handlers_are_awaited_in_order() -> None:
    class Slow(Recorder):
        async def on_arrival(self, event: Event) -> bool:  # type: ignore[override]
            await asyncio.sleep(0.001 * (3 - event.subject))  # the first waits longest
            return super().on_arrival(event)

    sim = Slow(EventQueue(order=(END, ARRIVAL)), length=0.5)
    for job in range(3):
        sim.queue.push(float(job), ARRIVAL, job)
    asyncio.run(run_async(sim))
    assert sim.log == [
        (0.0, ARRIVAL, 0),
        (0.5, END, 0),
        (1.0, ARRIVAL, 1),
        (1.5, END, 1),
        (2.0, ARRIVAL, 2),
        (2.5, END, 2),
    ]
    assert sim.settled == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]


@pytest.mark.parametrize(
    ("old", "name", "new"),
    [
        ("gpuopt.planning.replay", "replay", "gpuopt.simulate.jobs"),
        ("gpuopt.planning.replay", "ClusterNode", "gpuopt.simulate.jobs"),
        ("gpuopt.gang.replay", "replay_gangs", "gpuopt.simulate.gangs"),
        ("gpuopt.gang.replay", "METHODS", "gpuopt.simulate.gangs"),
        ("gpuopt.sharing.replay", "ReplayResult", "gpuopt.simulate.pods"),
        ("gpuopt.sharing.replay", "OPENB_TRACES", "gpuopt.readers.openb"),
    ],
)
def test_old_paths_warn_and_give_the_same_object(old: str, name: str, new: str) -> None:
    import importlib

    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} is deprecated: use {new}\."):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError, match="no attribute '_State'"):
        _ = module._State


def test_sharing_exports_the_pod_replay_without_a_warning() -> None:
    import gpuopt.sharing
    import gpuopt.sharing.replay
    from gpuopt.simulate import pods

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from gpuopt.sharing import ReplayResult, replay

    assert replay is pods.replay and ReplayResult is pods.ReplayResult
    assert gpuopt.sharing.replay is pods.replay
