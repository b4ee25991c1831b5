"""Fixtures for the admin API: the API with a store (each backend) and a stand-in applier, on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.api.ingest.conftest import TOKEN, ApiServer, start_api
from tests.support.store import store_postgres, store_url
from warren.broker.live_apply import Removal
from warren.core.errors import RoutingUnconfirmed, WarrenError
from warren.topology.config import Endpoint, WarrenConfig

__all__ = ["start_api", "store_postgres", "store_url"]

ADMIN_TOKEN = "admin-token-0123456789abcdef"


@dataclass
class StandInApplier:
    """TEST DOUBLE for ``warren.broker.live_apply`` (built on another branch): records what it was asked to do,
    and refuses to remove an endpoint named in ``holding`` without force, as the real one does."""

    applied: list[Endpoint] = field(default_factory=list)
    removed: list[tuple[str, bool]] = field(default_factory=list)
    holding: set[str] = field(default_factory=set)
    pauses: list[float] = field(default_factory=list)  # seconds the next applies take to return, once applied
    promotions: list[bool] = field(default_factory=list)  # each apply's ``promoting``
    unconfirmed: int = 0  # the next applies of a promotion refused as the routing stage unconfirmed

    async def apply_endpoint(
        self, settings: WarrenConfig, endpoint: Endpoint, *, connection: object = None, promoting: bool = False
    ) -> None:
        assert settings.endpoint(endpoint.name) == endpoint
        self.promotions.append(promoting)
        if promoting and self.unconfirmed:
            self.unconfirmed -= 1
            raise RoutingUnconfirmed(f"endpoint {endpoint.name!r} not promoted: apply it again", ["p.route.p0"])
        self.applied.append(endpoint)
        if self.pauses:
            await asyncio.sleep(self.pauses.pop(0))

    async def remove_endpoint(
        self, settings: WarrenConfig, name: str, *, force: bool, connection: object = None
    ) -> Removal:
        if name in self.holding and not force:
            raise WarrenError(f"{name} holds 3 messages: remove it with force to discard them")
        self.removed.append((name, force))
        return Removal(queued=3) if name in self.holding else Removal()


@dataclass
class AdminServer:
    api: ApiServer
    applier: StandInApplier
    config: WarrenConfig

    async def call(self, method: str, path: str, body: Any = None, *, token: str | None = ADMIN_TOKEN) -> Any:
        return await self.api.request(method, path, body, token=token)


@pytest.fixture
def start_admin(
    make_config: Callable[..., WarrenConfig], store_url: str, start_api: Callable[..., Awaitable[ApiServer]]
) -> Callable[..., Awaitable[AdminServer]]:
    """``await start_admin(endpoints=[...], **sections)``: the API with the admin routes, on a free port."""

    async def start(endpoints: list[dict[str, Any]] | None = None, **sections: Any) -> AdminServer:
        api = {"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN], **sections.pop("api", {})}
        store = {"url": store_url, **sections.pop("store", {})}
        config = make_config(endpoints, api=api, store=store, **sections)
        applier = StandInApplier()
        return AdminServer(await start_api(config, applier=applier), applier, config)

    return start
