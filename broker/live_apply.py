"""Live apply: one endpoint's RabbitMQ objects declared or removed at runtime, and the fleet told at once.

The admin API calls these two functions after it changed its store; nothing here reads a database. Workers learn
the change through RabbitMQ (``consumers/live_endpoints.py``): a record on the endpoints exchange, which every
worker hears and the endpoints stream remembers (latest record per endpoint wins).
"""

from __future__ import annotations

from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.errors import EndpointNotEmpty, LiveApplyError

__all__ = ["EndpointConfig", "EndpointNotEmpty", "LiveApplyError", "Settings", "apply_endpoint", "remove_endpoint"]

# The names the admin side uses for the configuration types.
Settings = WarrenConfig
EndpointConfig = Endpoint


async def apply_endpoint(settings: Settings, endpoint: EndpointConfig) -> None:
    """Declare ``endpoint``'s exchange, bindings and queues (idempotent), then announce it to every worker.

    Raises EndpointNotEmpty when the change moves ordering or partitions of queues that hold messages,
    LiveApplyError when it cannot be applied otherwise, BrokerUnavailable when RabbitMQ cannot be reached.
    """
    raise NotImplementedError


async def remove_endpoint(settings: Settings, name: str, *, force: bool) -> None:
    """Stop delivery to ``name`` everywhere, then delete its queues when empty.

    With ``force``, what its queues still hold is first moved into its dead-letter queue. Without it, raises
    EndpointNotEmpty (and changes nothing) when its queues hold messages.
    """
    raise NotImplementedError
