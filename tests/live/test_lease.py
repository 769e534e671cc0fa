"""Leader election by Lease (L9) against an in-memory API with a hand-driven clock."""

from __future__ import annotations

import pytest

from gpuopt.errors import ProblemError
from gpuopt.live.api import LEASES
from gpuopt.live.lease import DEFAULT_NAME, LeaderLease, micro_time, parse_micro_time
from tests.live.memory_api import MemoryApi

START = 1_765_000_000.0  # 2025-12-06T05:46:40Z


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def stored(api: MemoryApi, namespace: str = "default") -> dict[str, object]:
    return dict(api.get(LEASES, DEFAULT_NAME, namespace)["spec"])


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    assert micro_time(START + 0.5) == "2025-12-06T05:46:40.500000Z"
    assert parse_micro_time(micro_time(START + 0.25)) == START + 0.25
    assert parse_micro_time("2025-12-06T05:46:40Z") == START
    with pytest.raises(ProblemError, match="'yesterday'"):
        parse_micro_time("yesterday")


def test_an_absent_lease_is_created_and_held() -> None:
    api, clock = MemoryApi(), Clock()
    lease = LeaderLease(api, "pod-1", namespace="ops", clock=clock)
    assert lease.tick() and lease.is_leader()
    assert stored(api, "ops") == {
        "holderIdentity": "pod-1",
        "leaseDurationSeconds": 15,
        "acquireTime": "2025-12-06T05:46:40.000000Z",
        "renewTime": "2025-12-06T05:46:40.000000Z",
        "leaseTransitions": 0,
    }


def test_renew_every_renew_seconds_keeps_acquire_time() -> None:
    api, clock = MemoryApi(), Clock()
    lease = LeaderLease(api, "pod-1", renew=2, clock=clock)
    lease.tick()
    clock.now += 1  # not due: nothing written
    writes = len(api.writes)
    assert lease.tick() and len(api.writes) == writes
    clock.now += 1.5
    assert lease.tick()
    spec = stored(api)
    assert spec["renewTime"] == micro_time(START + 2.5)
    assert spec["acquireTime"] == micro_time(START)
    assert api.writes[-1][0] == "replace"  # an update, with the resourceVersion read


def test_a_held_lease_is_not_taken_until_it_expires() -> None:
    api, clock = MemoryApi(), Clock()
    one = LeaderLease(api, "one", clock=clock)
    two = LeaderLease(api, "two", clock=clock)
    assert one.tick()
    clock.now += 15  # renewTime + leaseDurationSeconds is now: not yet in the past
    assert not two.try_acquire_or_renew() and two.last == "held by one"
    clock.now += 0.5
    assert two.try_acquire_or_renew()
    spec = stored(api)
    assert spec["holderIdentity"] == "two" and spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == micro_time(START + 15.5)
    assert not one.is_leader()  # its deadline (10 s) passed long before


def test_a_conflict_loses_the_lease() -> None:
    api, clock = MemoryApi(), Clock()
    lease = LeaderLease(api, "one", clock=clock)
    api.conflicts = 1  # another replica created it first
    assert not lease.tick() and "409" in lease.last
    lease.tried = None
    assert lease.tick()
    api.conflicts = 1  # another replica updated it since it was read
    clock.now += 2
    assert not lease.tick() and not lease.is_leader()


def test_a_leader_that_cannot_renew_stops_at_its_deadline() -> None:
    api, clock = MemoryApi(), Clock()
    lease = LeaderLease(api, "one", renew=2, deadline=10, clock=clock)
    assert lease.tick()

    def unreachable(*args: object, **kwargs: object) -> dict[str, object]:
        raise ProblemError("https://10.0.0.1:6443 cannot be reached.")

    api.get = unreachable  # type: ignore[method-assign]
    clock.now += 9.9
    assert lease.tick() and lease.last.startswith("renew failed")  # still within the deadline
    clock.now += 0.2
    assert not lease.tick() and not lease.is_leader()


def test_release_lets_another_replica_take_it_at_once() -> None:
    api, clock = MemoryApi(), Clock()
    one = LeaderLease(api, "one", clock=clock)
    two = LeaderLease(api, "two", clock=clock)
    one.tick()
    one.release()
    assert not one.is_leader() and "holderIdentity" not in stored(api)
    assert two.try_acquire_or_renew()
    assert stored(api)["leaseTransitions"] == 0  # nobody held it when two took it


@pytest.mark.parametrize(
    ("times", "identity"),
    [((2, 10, 10), "me"), ((0, 5, 15), "me"), ((2, 10, 15), "")],
)
def test_bad_settings_are_refused(times: tuple[float, float, float], identity: str) -> None:
    renew, deadline, duration = times
    with pytest.raises(ProblemError):
        LeaderLease(MemoryApi(), identity, renew=renew, deadline=deadline, duration=duration)
