"""The endpoint states the admin API answers with: read from the state stream once per connection, then followed.

Every answer about an endpoint carries its state (active, paused, open...). Reading the state stream to its end
for each answer (warren/broker/amqp/stream_read.py) appends a marker to the stream and reads every record and
marker before it, so each answer cost more than the last: creating endpoints one by one through the API grew
quadratically (800 creates: a median of 176 ms a create, against 53 ms for the first 300). Instead the service
reads the stream once on its link's connection, hears every record broadcast from then on through an exclusive
queue of that connection (as workers do, ``StateStore.listen``), and answers from what it holds. A new
connection (the link reconnected or renewed its channel numbers) reads the stream again.

What it gives up: a state another process changed is seen once its broadcast arrives (milliseconds later),
not at the instant of the question; the service's own changes (``heard``) count at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from aio_pika.abc import AbstractConnection

from warren.broker.endpoint_state.records import EndpointView, StateRecord
from warren.broker.endpoint_state.stream import StateStore

__all__ = ["FollowedStates"]


class FollowedStates:
    """``await states.views(connection)``: endpoint -> its view, current as of the last broadcast heard."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._views: dict[str, EndpointView] = {}
        self._on: AbstractConnection | None = None
        self._store: StateStore | None = None
        self._lock = asyncio.Lock()

    async def views(self, connection: AbstractConnection) -> Mapping[str, EndpointView]:
        async with self._lock:
            if self._on is not connection or connection.is_closed:
                await self._follow(connection)
        return self._views

    def heard(self, records: Iterable[StateRecord]) -> None:
        """Records this process published itself: they count now, before their broadcast comes back."""
        _apply(self._views, records)

    async def _follow(self, connection: AbstractConnection) -> None:
        await self.close()
        views: dict[str, EndpointView] = {}
        store = StateStore(self.prefix)
        await store.attach(connection)
        try:
            await store.listen(lambda record: _apply(views, (record,)))  # first: nothing published meanwhile is missed
            _apply(views, await store.load(connection))
        except BaseException:
            await store.detach()
            raise
        self._views, self._on, self._store = views, connection, store

    async def close(self) -> None:
        store, self._store, self._on = self._store, None, None
        if store is not None:
            await store.detach()


def _apply(views: dict[str, EndpointView], records: Iterable[StateRecord]) -> None:
    for record in records:  # each view keeps the newest record of each kind, whatever order they come in
        views.setdefault(record.endpoint, EndpointView(record.endpoint)).apply(record)
