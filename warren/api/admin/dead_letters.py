"""The admin operations on an endpoint's dead letters: recover what died since a moment, replay chosen events.

Both are the client-side replay of warren/broker/dlq/recover.py on the service's link: confirmed, then removed
from the DLQ. A lane endpoint's letters are picked out of its lane's shared DLQ by the endpoint they name and go
back to its lane; its lane-mates' stay, in order, and are not counted in the answer (a lane-mate may be another
tenant's).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aio_pika.abc import AbstractConnection

from warren.api.admin.service import REFUSED, EndpointService
from warren.api.ingest.errors import BROKER_UNAVAILABLE, ApiError
from warren.broker.dlq.move import MoveReport
from warren.broker.dlq.recover import recover, replay_events, shared_lanes
from warren.core.errors import BrokerUnavailable, ReplayError, TopologyError

__all__ = ["recover_since", "replay_chosen"]

Move = Callable[[AbstractConnection, int], Awaitable[MoveReport]]  # on a connection, with the endpoint's lanes


async def _move(service: EndpointService, name: str, what: str, move: Move) -> MoveReport:
    """A move of the endpoint's dead letters on the service's link, its failures as answers."""
    lanes = shared_lanes(service.config, (await service.get(name)).home)
    try:
        async with service.link.connection() as connection:
            return await move(connection, lanes)
    except BrokerUnavailable as exc:
        raise ApiError(503, BROKER_UNAVAILABLE, f"nothing {what}: {exc}") from exc
    except (ReplayError, TopologyError) as exc:
        raise ApiError(409, REFUSED, str(exc)) from exc


async def recover_since(service: EndpointService, name: str, since_ms: int) -> MoveReport:
    """Send back what failed for good since ``since_ms``: the endpoint's letters dead at or after it."""
    prefix = service.config.broker.prefix
    return await _move(service, name, "recovered", lambda c, lanes: recover(c, prefix, name, since_ms, lanes=lanes))


async def replay_chosen(service: EndpointService, name: str, event_ids: frozenset[str]) -> MoveReport:
    """Send back the endpoint's dead letters of ``event_ids``, each with a fresh budget."""
    prefix = service.config.broker.prefix
    return await _move(
        service, name, "replayed", lambda c, lanes: replay_events(c, prefix, name, event_ids, lanes=lanes)
    )
