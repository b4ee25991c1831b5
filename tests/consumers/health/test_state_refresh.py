"""The periodic re-append of endpoint states in force (``worker.state_refresh_interval``, an hour by default)
on the real broker, at 200 ms: the stream is size-bounded, so a state nobody changes must be written again
before retention drops it, and a stopped worker must stop writing."""

from __future__ import annotations

import asyncio
import time

import pytest

from warren.broker.endpoint_state.admin import change_admin, open_connection
from warren.broker.endpoint_state.records import ADMIN, DISABLED, StateRecord
from warren.broker.endpoint_state.stream import StateStore
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(20)

INTERVAL = 0.2  # the timer looks every 50 ms tick: well above it, so a refresh at every tick shows


async def test_states_in_force_are_re_appended_each_interval_until_the_worker_stops(endpoint_config) -> None:
    # Given an endpoint an operator disabled (one record in the stream) and one with nothing to say
    config = await endpoint_config(
        [{"name": "held"}, {"name": "fine"}], worker={"state_refresh_interval": f"{int(INTERVAL * 1000)}ms"}
    )
    async with open_connection(config) as connection:
        await change_admin(connection, config, "held", "disable", "for the refresh test")
        store = StateStore(config.broker.prefix)
        await store.attach(connection)
        (disabled,) = await store.load(connection)
        assert (disabled.endpoint, disabled.kind, disabled.state) == ("held", ADMIN, DISABLED)

        async def stream() -> list[StateRecord]:
            return await store.load(connection)

        # When a worker runs with a refresh interval of 200 ms (each wait drawn in 180-220 ms)
        async with Worker(config):
            started = time.monotonic()
            while len(records := await stream()) < 4 and time.monotonic() - started < 5:
                await asyncio.sleep(0.01)
            took = time.monotonic() - started
        stopped = await stream()
        # Then the disabled state was appended again, as it was (same version: a copy, not a change), three
        # times after three waits of at least 180 ms each, the first of which began during the worker's start,
        # before ``started`` (so the window opens at two waits: a refresh at every 50 ms tick takes about
        # 0.25 s), and in well under the hour the default would take; the endpoint with nothing in force got
        # nothing
        assert records[:4] == [disabled] * 4, records
        assert 2 * INTERVAL * 0.9 <= took < 4.0, took
        assert all(record.endpoint == "held" for record in stopped)
        # And once the worker stopped, three more intervals append nothing (the copies read at its stop stay all)
        await asyncio.sleep(3 * INTERVAL * 1.1)
        assert await stream() == stopped
