"""The event loop every replay shares: a clock and one queue of timed events.

A replay is a state that events change. Each event has a time, a kind
(``"arrival"``, ``"end"``, ``"tick"`` or a replay's own, such as a standby
window's ``"lend"``), a subject (a job's position or id) and a version (a
replay bumps a job's version to cancel the events of an earlier run: those
come out of the queue stale and the replay ignores them).

Order
    Events leave the queue by ``(time, rank, tie, sequence)``:

    - ``rank``: the position of the event's kind in the queue's ``order``
      (kinds not named there rank after all named ones, alike), so a replay
      chooses, for instance, whether ends at time t come before arrivals at t;
    - ``tie``: a key the replay gives with the event (a job id, an arrival
      number; ``()`` by default);
    - ``sequence``: the order of the pushes, so that equal keys leave first
      in, first out and every run is deterministic.

The loop
    :func:`run` pops every event, moving :attr:`Simulation.clock` forward
    (:meth:`Simulation.advance` sees every step, stale events included, so a
    time average counts the whole span), hands the event to ``on_<kind>``
    (:meth:`Simulation.dispatch`), and when that returns True (the state
    changed so that waiting work may start) calls :meth:`Simulation.settle`.
    Handlers push new events (a job's end when it starts); the loop ends when
    the queue is empty. :func:`run_async` is the same loop for handlers that
    are coroutines (the extender harness awaits HTTP answers).

A new replay subclasses :class:`Simulation`, pushes its arrivals, writes one
``on_<kind>`` method per kind and, if it keeps a queue of waiting work, a
``settle``:

>>> class Count(Simulation):
...     def on_arrival(self, event: Event) -> bool:
...         self.queue.push(event.time + 2.0, "end", event.subject)
...         return False
...     def on_end(self, event: Event) -> bool:
...         self.log.append((event.time, event.subject))
...         return False
>>> sim = Count(EventQueue(order=("end", "arrival")))
>>> sim.log = []
>>> for job, at in enumerate([0.0, 1.0, 2.0]):
...     sim.queue.push(at, "arrival", job)
>>> run(sim).log, sim.clock
([(2.0, 0), (3.0, 1), (4.0, 2)], 4.0)
"""

from __future__ import annotations

import heapq
import inspect
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

#: A job or pod comes in.
ARRIVAL = "arrival"
#: A job or pod leaves (finishes, is deleted).
END = "end"
#: A periodic step, for a replay that acts every so often (a planner's re-plan).
TICK = "tick"


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happens at ``time``: ``kind`` to ``subject`` (of run ``version``)."""

    time: float
    kind: str
    subject: Any
    version: int = 0


class EventQueue:
    """Timed events, leaving by (time, rank of kind, tie, sequence): see the module docstring.

    Parameters
    ----------
    order
        The kinds, first to leave at equal times first; kinds not named rank
        last, alike (then ``tie`` and the push order decide).
    """

    def __init__(self, order: Sequence[str] = ()) -> None:
        self._rank = {kind: rank for rank, kind in enumerate(order)}
        self._last = len(self._rank)
        self._heap: list[tuple[float, int, Hashable, int, Event]] = []
        self._sequence = 0

    def push(
        self, time: float, kind: str, subject: Any, version: int = 0, *, tie: Hashable = ()
    ) -> None:
        """Add the event ``kind`` of ``subject`` at ``time`` (``tie`` orders equal times)."""
        event = Event(time, kind, subject, version)
        rank = self._rank.get(kind, self._last)
        heapq.heappush(self._heap, (time, rank, tie, self._sequence, event))
        self._sequence += 1

    def pop(self) -> Event:
        """The next event, out of the queue.

        Raises
        ------
        IndexError
            When the queue is empty.
        """
        return heapq.heappop(self._heap)[-1]

    def peek(self) -> Event | None:
        """The next event, left in the queue (None when it is empty)."""
        return self._heap[0][-1] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __iter__(self) -> Iterator[Event]:
        """Pop events until the queue is empty (events pushed meanwhile included)."""
        while self._heap:
            yield heapq.heappop(self._heap)[-1]


class Simulation:
    """A replay's state driven by :func:`run`; subclasses write ``on_<kind>`` handlers.

    Attributes
    ----------
    queue
        The replay's events.
    clock
        The time of the last event popped (``start`` before the first).
    events
        Events popped so far, stale ones included.
    """

    def __init__(self, queue: EventQueue, *, start: float = 0.0) -> None:
        self.queue = queue
        self.clock = start
        self.events = 0

    def advance(self, now: float) -> None:
        """Called with each event's time before its handler; the default sets :attr:`clock`.

        Overrides that integrate over time (GPUs held, fragmented nodes) read
        the old :attr:`clock` first and then call this.
        """
        self.clock = now

    def handler(self, kind: str) -> Callable[[Event], Any]:
        """The method ``on_<kind>``.

        Raises
        ------
        ValueError
            For a kind the replay has no handler for.
        """
        found = getattr(self, f"on_{kind}", None)
        if found is None:
            raise ValueError(f"event kind {kind!r} has no handler on_{kind}")
        return cast(Callable[[Event], Any], found)

    def dispatch(self, event: Event) -> bool:
        """Hand ``event`` to ``on_<kind>``; True when waiting work may start (then
        :meth:`settle` runs)."""
        return bool(self.handler(event.kind)(event))

    def settle(self, event: Event) -> None:
        """After a handler returned True: start what can start now (no-op by default)."""


SimulationT = TypeVar("SimulationT", bound=Simulation)


def run(simulation: SimulationT) -> SimulationT:
    """Pop every event of ``simulation.queue`` in order and apply it (module docstring).

    Returns
    -------
    Simulation
        ``simulation`` itself, in its final state.
    """
    for event in simulation.queue:
        simulation.events += 1
        simulation.advance(event.time)
        if simulation.dispatch(event):
            simulation.settle(event)
    return simulation


async def run_async(simulation: SimulationT) -> SimulationT:
    """:func:`run` for a replay whose handlers may be coroutines (they are awaited in turn,
    one event at a time, so the order is the same).

    >>> import asyncio
    >>> class Echo(Simulation):
    ...     async def on_arrival(self, event: Event) -> bool:
    ...         await asyncio.sleep(0)
    ...         print(event.time, event.subject)
    ...         return False
    >>> sim = Echo(EventQueue())
    >>> sim.queue.push(2.0, "arrival", "b"); sim.queue.push(1.0, "arrival", "a")
    >>> _ = asyncio.run(run_async(sim))
    1.0 a
    2.0 b
    """
    for event in simulation.queue:
        simulation.events += 1
        simulation.advance(event.time)
        changed = simulation.handler(event.kind)(event)
        if inspect.isawaitable(changed):
            changed = await changed
        if changed:
            simulation.settle(event)
    return simulation


__all__ = ["ARRIVAL", "END", "TICK", "Event", "EventQueue", "Simulation", "run", "run_async"]
