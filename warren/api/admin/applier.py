"""The seam between the admin operations and RabbitMQ: declaring one endpoint's objects and telling workers.

``EndpointApplier`` is what the service needs; ``LiveApplier`` is the real one, which calls
``warren.broker.live_apply`` (imported on first use: it declares the endpoint's exchange, bindings and queues
incrementally and announces the change on the control exchange, so every worker serves it without a restart),
on the admin side's one shared connection (``AdminLink``) when it is given one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

from warren.api.admin.link import AdminLink
from warren.core.errors import WarrenError
from warren.topology.config import Endpoint, WarrenConfig

if TYPE_CHECKING:
    from warren.broker.live_apply import Removal

__all__ = ["EndpointApplier", "LiveApplier", "LiveApplyMissing"]

_MODULE = "warren.broker.live_apply"


class LiveApplyMissing(WarrenError):
    """This build has no live apply (``warren.broker.live_apply``)."""


class EndpointApplier(Protocol):
    async def apply_endpoint(self, settings: WarrenConfig, endpoint: Endpoint, *, promoting: bool = False) -> None:
        """Declare the endpoint's objects and announce it to workers; idempotent. ``promoting``: a lane endpoint
        moving to queues of its own (RoutingUnconfirmed when the routing stage does not confirm in time)."""

    async def remove_endpoint(self, settings: WarrenConfig, name: str, *, force: bool) -> Removal | None:
        """Stop delivery and delete its objects, its DLQ too; a clear WarrenError when it holds messages and not
        ``force`` (with ``force``, what it held is discarded and counted)."""


class LiveApplier:
    """The applier of a running deployment: ``warren.broker.live_apply``, on ``link``'s connection if given."""

    def __init__(self, link: AdminLink | None = None) -> None:
        self.link = link

    def _module(self) -> object:
        try:
            return importlib.import_module(_MODULE)
        except ModuleNotFoundError as exc:
            if exc.name != _MODULE:
                raise
            raise LiveApplyMissing(
                "this build cannot apply endpoints to RabbitMQ live (no warren.broker.live_apply)"
            ) from None

    async def apply_endpoint(self, settings: WarrenConfig, endpoint: Endpoint, *, promoting: bool = False) -> None:
        module = self._module()
        if self.link is None:
            await module.apply_endpoint(settings, endpoint, promoting=promoting)  # type: ignore[attr-defined]
            return
        async with self.link.connection() as connection:
            await module.apply_endpoint(  # type: ignore[attr-defined]
                settings, endpoint, connection=connection, promoting=promoting
            )

    async def remove_endpoint(self, settings: WarrenConfig, name: str, *, force: bool) -> Removal | None:
        module = self._module()
        if self.link is None:
            removal: Removal = await module.remove_endpoint(settings, name, force=force)  # type: ignore[attr-defined]
            return removal
        async with self.link.connection() as connection:
            removal = await module.remove_endpoint(  # type: ignore[attr-defined]
                settings, name, force=force, connection=connection
            )
            return removal
