"""The effect journal's store calls wait out an outage instead of failing the agent."""

from __future__ import annotations

import asyncio

import pytest

from outlast.engine.outages import Patient
from outlast.errors import LeaseLost, StoreUnavailable


async def test_a_call_the_store_cannot_take_is_tried_again_until_it_can() -> None:
    tries: list[int] = []
    patient = Patient()
    seen_waiting: list[bool] = []

    async def start(key: str) -> str:
        tries.append(len(tries))
        seen_waiting.append(patient.waiting)
        if len(tries) < 3:
            raise StoreUnavailable("the store is out of reach")
        return key

    assert await patient(start, "step-1") == "step-1"
    assert len(tries) == 3 and seen_waiting == [False, True, True]
    assert not patient.waiting


async def test_a_lost_lease_is_not_waited_out() -> None:
    async def start() -> None:
        raise LeaseLost("another process holds the run")

    with pytest.raises(LeaseLost):
        await Patient()(start)


async def test_a_stop_ends_the_wait() -> None:
    patient = Patient()
    failed = asyncio.Event()

    async def start() -> None:
        failed.set()
        raise StoreUnavailable("the store is out of reach")

    task = asyncio.create_task(patient(start))
    await failed.wait()
    await asyncio.sleep(0)  # into its wait
    assert patient.waiting
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_call_that_ends_another_way_after_an_outage_waits_no_more() -> None:
    """An error other than the outage (which the agent may catch and go on from) ends the
    wait: a later outage's --storage-wait must not stop a run that is not waiting."""
    patient = Patient()
    tries: list[int] = []

    async def start() -> None:
        tries.append(1)
        if len(tries) == 1:
            raise StoreUnavailable("the store is out of reach")
        raise LeaseLost("another process holds the run")

    with pytest.raises(LeaseLost):
        await patient(start)
    assert len(tries) == 2
    assert not patient.waiting
