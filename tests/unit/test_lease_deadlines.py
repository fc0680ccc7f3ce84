"""A lease ends in the process holding it one TTL after the sending of the last claim or
renewal of it that succeeded, and another process waits a margin past the store's
expiry: the holder has stopped by then."""

from __future__ import annotations

from outlast.engine.leases import LeaseKeeper, takeover_after
from outlast.store.base import LeaseRenewer, LeaseState, takeover_margin


class NoRenewer(LeaseRenewer):
    def renew(self, instance: str, ttl: float, rids: list[int]) -> list[LeaseState]:
        raise ConnectionError("cut off")

    def close(self) -> None:
        pass


def keeper(ttl: float = 3.0) -> LeaseKeeper:
    return LeaseKeeper(NoRenewer(), "me", ttl, lambda rids, held: None)


def test_a_lease_ends_one_ttl_after_the_last_success_was_sent() -> None:
    k = keeper(3.0)
    k.track({1: "r1", 2: "r2"})
    k.held([1, 2], 100.0)  # claimed by a statement sent at 100
    k.held([2], 101.5)  # run 2 renewed by one sent at 101.5
    assert k.expired(102.9) == []
    assert k.expired(103.0) == [1]
    assert k.expired(104.0) == []  # said once
    assert k.expired(104.5) == [2]


def test_an_older_renewal_never_moves_a_deadline_back() -> None:
    k = keeper(3.0)
    k.track({1: "r1"})
    k.held([1], 110.0)
    k.held([1], 105.0)  # an answer to an earlier statement, arriving late
    assert k.expired(112.9) == [] and k.expired(113.0) == [1]


def test_runs_no_longer_executing_here_are_forgotten() -> None:
    k = keeper(3.0)
    k.track({1: "r1"})
    k.held([1], 100.0)
    k.track({})
    assert k.expired(200.0) == []


def test_the_takeover_waits_past_the_holders_deadline() -> None:
    for ttl in (0.5, 2.0, 3.0, 10.0, 60.0):
        margin = takeover_margin(ttl)
        assert margin >= 1.0 and margin >= ttl / 4
        # The holder checks its deadlines every TTL/12: it stops well within the margin.
        assert margin > ttl / 12
        assert takeover_after(ttl) == ttl + margin
