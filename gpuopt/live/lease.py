"""One leader among the controller's replicas, through a Lease (rule L9 of ``models/live.md``).

A replica takes the Lease (``coordination.k8s.io/v1``, default name
:data:`DEFAULT_NAME`) when it is absent or expired (``renewTime`` +
``leaseDurationSeconds`` in the past), then renews it every ``renew``
seconds. Every write is a create (absent: 409 when another replica created it
first) or an update of the Lease as read, with its ``metadata.resourceVersion``
(409 when another replica wrote it since): a 409 means another replica won,
and this one is not the leader. A leader that has not renewed within
``deadline`` seconds of its last successful renew is no longer the leader
(:meth:`LeaderLease.is_leader` says False before its next action), and since
``deadline`` is shorter than ``duration``, no other replica can take the
Lease before that: two replicas never act at once. This is client-go's
leader election (``LeaseDuration`` 15 s, ``RenewDeadline`` 10 s,
``RetryPeriod`` 2 s by default), written for one thread that calls
:meth:`LeaderLease.tick` in its loop.

Examples
--------
>>> from gpuopt.live.lease import LeaderLease, micro_time, parse_micro_time
>>> micro_time(0.25)
'1970-01-01T00:00:00.250000Z'
>>> parse_micro_time("1970-01-01T00:00:10.500000Z")
10.5
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from gpuopt.errors import ProblemError
from gpuopt.live.api import LEASES, Api, Conflict, NotFound, Obj

#: The Lease's name unless told (``--lease-name``).
DEFAULT_NAME = "gpuopt-controller"


def micro_time(seconds: float) -> str:
    """A Kubernetes ``MicroTime`` (RFC 3339, microseconds, UTC) of Unix ``seconds``."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float:
    """Unix seconds of a ``MicroTime`` or ``Time`` (``...Z`` or with an offset)."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ProblemError(f"Lease: time {text!r} is not an RFC 3339 time.") from None


class LeaderLease:
    """Leader election through one Lease (L9).

    Parameters
    ----------
    api
        The API (:class:`gpuopt.live.api.Api`).
    identity
        This replica's ``holderIdentity`` (the CLI's default: hostname-pid).
    name, namespace
        The Lease.
    duration
        ``leaseDurationSeconds``: how long others wait after the last renew.
    renew
        Seconds between two renews.
    deadline
        A leader that has not renewed for this long stops acting; below ``duration``.
    clock
        Unix seconds now (injectable for tests).
    """

    def __init__(
        self,
        api: Api,
        identity: str,
        *,
        name: str = DEFAULT_NAME,
        namespace: str = "default",
        duration: float = 15.0,
        renew: float = 2.0,
        deadline: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not identity:
            raise ProblemError("identity: give a non-empty holder identity.")
        if not 0 < renew < deadline < duration:
            raise ProblemError(
                f"lease: renew {renew:g} s, deadline {deadline:g} s and duration {duration:g} s "
                "must grow strictly (0 < renew < deadline < duration)."
            )
        self.api = api
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.duration = duration
        self.renew = renew
        self.deadline = deadline
        self.clock = clock
        #: when this replica last wrote the Lease as its holder (None: it does not hold it)
        self.renewed: float | None = None
        #: when :meth:`tick` last tried to write or read the Lease
        self.tried: float | None = None
        #: what happened at the last :meth:`tick` (for logs and reports)
        self.last: str = "not tried"

    def is_leader(self) -> bool:
        """Whether this replica may act now: it holds the Lease and renewed it within
        ``deadline`` seconds."""
        return self.renewed is not None and self.clock() < self.renewed + self.deadline

    def due(self) -> bool:
        """Whether :meth:`tick` should talk to the server now (``renew`` seconds after the
        last try, or never tried)."""
        return self.tried is None or self.clock() >= self.tried + self.renew

    def tick(self) -> bool:
        """Acquire or renew the Lease when :meth:`due`; return :meth:`is_leader`."""
        if self.due():
            try:
                self.try_acquire_or_renew()
            except ProblemError as exc:  # unreachable, 5xx, 403: leader until the deadline
                self.last = f"renew failed: {exc}"
        return self.is_leader()

    def try_acquire_or_renew(self) -> bool:
        """Read the Lease and take it (absent or expired) or renew it (held); True when this
        replica holds it after the call. A 409 loses it."""
        now = self.clock()
        self.tried = now
        try:
            lease = self.api.get(LEASES, self.name, self.namespace)
        except NotFound:
            return self._write(self._new_lease(now), now, create=True, what="acquired (created)")
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder == self.identity:
            if self.renewed is None:  # held under our name by a replica before a restart
                self.renewed = now
            updated = self._with_spec(lease, renewTime=micro_time(now))
            return self._write(updated, now, create=False, what="renewed")
        if holder and not self._expired(spec, now):
            self.renewed = None
            self.last = f"held by {holder}"
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        updated = self._with_spec(
            lease,
            holderIdentity=self.identity,
            leaseDurationSeconds=round(self.duration),
            acquireTime=micro_time(now),
            renewTime=micro_time(now),
            leaseTransitions=transitions,
        )
        return self._write(updated, now, create=False, what=f"acquired (from {holder or 'none'})")

    def release(self) -> None:
        """Give the Lease up (on a clean stop), so that another replica need not wait for it to
        expire: clear ``holderIdentity`` when this replica still holds it."""
        if not self.is_leader():
            self.renewed = None
            return
        try:
            lease = self.api.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                self.api.replace(
                    LEASES, self._with_spec(lease, holderIdentity=None, leaseDurationSeconds=1)
                )
        except (Conflict, NotFound):
            pass
        self.renewed = None
        self.last = "released"

    def _expired(self, spec: dict[str, Any], now: float) -> bool:
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        if not renewed:
            return True
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        return parse_micro_time(renewed) + duration < now

    def _new_lease(self, now: float) -> Obj:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": round(self.duration),
                "acquireTime": micro_time(now),
                "renewTime": micro_time(now),
                "leaseTransitions": 0,
            },
        }

    @staticmethod
    def _with_spec(lease: Obj, **fields: Any) -> Obj:
        updated = copy.deepcopy(lease)
        spec = updated.setdefault("spec", {})
        for key, value in fields.items():
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value
        return updated

    def _write(self, lease: Obj, now: float, *, create: bool, what: str) -> bool:
        try:
            if create:
                self.api.create(LEASES, lease, namespace=self.namespace)
            else:
                self.api.replace(LEASES, lease)
        except Conflict:
            self.renewed = None
            self.last = "lost (409: another replica wrote the Lease first)"
            return False
        self.renewed = now
        self.last = what
        return True


__all__ = ["DEFAULT_NAME", "LeaderLease", "micro_time", "parse_micro_time"]
