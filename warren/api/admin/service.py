"""The admin operations on endpoints, shared by the admin API and ``warren endpoint create|update|...``.

Each operation checks the request against the store, applies it to RabbitMQ through the ``EndpointApplier``
(declare, announce, remove) and then writes the store. Apply first: a failed apply leaves the store as it was
and the caller can retry (applying is idempotent); a store write failing after an apply leaves declared
objects that the retry reuses. Endpoints from the configuration file (``managed_by: file``) are read-only
here: ``warren setup`` owns them. Their state (pause, disable...) is runtime, not configuration, so it may
change through here as through ``warren endpoint pause``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from warren.api.admin.applier import EndpointApplier, LiveApplier
from warren.api.admin.homes import home_after_update, ordered_move, with_home
from warren.api.admin.key_choice import keys_to_make, new_key, public_keys, rotated_secrets, signs_hidden
from warren.api.admin.link import AdminLink
from warren.api.admin.send_test_event import TestResult, TestSender, delivered
from warren.api.admin.state_views import FollowedStates
from warren.api.ingest.body import invalid, validation_problems
from warren.api.ingest.errors import BROKER_UNAVAILABLE, STORE_UNAVAILABLE, ApiError
from warren.broker.endpoint_state.admin import AdminError, change_admin
from warren.broker.endpoint_state.records import EndpointView, summary
from warren.broker.live_apply import Removal
from warren.core.errors import BrokerUnavailable, RoutingUnconfirmed, WarrenError
from warren.store.keys import StoreKeyError
from warren.store.records import (
    API,
    FILE,
    RevealedSecret,
    StoredEndpoint,
    StoredSecret,
    endpoint_options,
    to_endpoint,
)
from warren.store.repository import UNREACHABLE, EndpointStore, NameTaken
from warren.topology.addresses import url_host_problem
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.proxies import proxy_problem
from warren.topology.secrets import SecretError
from warren.topology.signing_keys import Scheme
from warren.topology.topics import topic_matches

__all__ = [
    "ACTIONS",
    "ENDPOINT_EXISTS",
    "FILE_MANAGED",
    "NOT_FOUND",
    "REFUSED",
    "EndpointService",
    "Page",
    "TestResult",
    "delivered",
    "not_found",
    "open_service",
]

NOT_FOUND = "not_found"
ENDPOINT_EXISTS = "endpoint_exists"
FILE_MANAGED = "file_managed"
ROUTING_UNCONFIRMED = "routing_unconfirmed"  # a promotion undone: the routing stage did not confirm in time
REFUSED = "refused"  # RabbitMQ refused the change (holds messages, ordering change, a state change that does not apply)
INVALID_ENDPOINT = "invalid_endpoint"

ACTIONS = ("pause", "resume", "disable", "enable")


@dataclass(frozen=True)
class Page:
    endpoints: list[tuple[StoredEndpoint, str]]  # with its state
    next_cursor: str | None


def not_found(name: str) -> ApiError:
    return ApiError(404, NOT_FOUND, f"no endpoint {name!r}")


def _file_managed(name: str) -> ApiError:
    return ApiError(
        409,
        FILE_MANAGED,
        f"endpoint {name!r} comes from the configuration file: change it there and run `warren setup`",
    )


class EndpointService:
    """Endpoints as live data: the store, RabbitMQ through ``applier``, and ``config`` for everything else.

    Every RabbitMQ operation (states, state changes, the real applier's) runs on ``link``, closed by ``close()``.
    """

    def __init__(self, config: WarrenConfig, store: EndpointStore, applier: EndpointApplier | None = None) -> None:
        self.config = config
        self.store = store
        self.link = AdminLink(config.broker)
        self.applier: EndpointApplier = applier or LiveApplier(self.link)
        self.followed = FollowedStates(config.broker.prefix)
        self.tester = TestSender(config.delivery)
        self._changes: dict[str, tuple[asyncio.Lock, int]] = {}  # endpoint -> its lock, and who holds or awaits it

    @contextlib.asynccontextmanager
    async def _changing(self, name: str) -> AsyncIterator[None]:
        """One change to endpoint ``name`` at a time: each applies to RabbitMQ, then writes the store, and two
        at once could leave workers on the one the store did not keep (the later apply, the earlier write)."""
        lock, users = self._changes.get(name, (asyncio.Lock(), 0))
        self._changes[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._changes[name]
            if users == 1:
                del self._changes[name]
            else:
                self._changes[name] = (lock, users - 1)

    async def close(self) -> None:
        await self.tester.close()
        await self.followed.close()
        await self.link.close()

    # -- reading -------------------------------------------------------------------------------------------

    async def _guarded(self, coroutine: Any) -> Any:
        try:
            return await coroutine
        except ApiError:
            raise
        except StoreKeyError as exc:
            raise ApiError(503, STORE_UNAVAILABLE, f"the endpoint store's keys: {exc}") from exc
        except UNREACHABLE as exc:
            raise ApiError(503, STORE_UNAVAILABLE, f"the endpoint store is unavailable: {exc}") from exc

    async def get(self, name: str) -> StoredEndpoint:
        stored: StoredEndpoint | None = await self._guarded(self.store.get(name))
        if stored is not None:
            return stored
        for endpoint in self.config.endpoints:  # in the file, not reconciled yet (`warren setup` stores it)
            if endpoint.name == name:
                return StoredEndpoint(
                    name, getattr(endpoint, "tenant", None), endpoint.url, endpoint.events,
                    endpoint_options(endpoint), FILE, 0.0, 0.0, 0,
                )  # fmt: skip
        raise not_found(name)

    async def states(self, names: Sequence[str]) -> dict[str, str]:
        """Each endpoint's state as the fleet knows it (RabbitMQ's state stream, followed: state_views.py)."""
        try:
            async with self.link.connection() as connection:
                views = await self.followed.views(connection)
        except WarrenError as exc:  # unreachable, or `warren setup` never ran
            raise ApiError(503, BROKER_UNAVAILABLE, f"cannot read endpoint states: {exc}") from exc
        now = time.time()
        return {name: summary(views.get(name) or EndpointView(name), now)[0] for name in names}

    async def list_endpoints(
        self,
        *,
        tenant: str | None = None,
        state: str | None = None,
        event_type: str | None = None,
        managed_by: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """A page of endpoints in name order; ``state`` and ``event_type`` filter after the store's query."""
        found: list[tuple[StoredEndpoint, str]] = []
        after = cursor
        while len(found) <= limit:
            batch: list[StoredEndpoint] = await self._guarded(
                self.store.list_endpoints(tenant=tenant, managed_by=managed_by, after=after, limit=max(limit, 100))
            )
            if not batch:
                break
            after = batch[-1].name
            if event_type is not None:
                batch = [s for s in batch if _subscribes(s, event_type)]
            states = await self.states([s.name for s in batch])
            found.extend((s, states[s.name]) for s in batch if state is None or states[s.name] == state)
        page = found[:limit]
        return Page(page, page[-1][0].name if len(found) > limit else None)

    # -- changing ------------------------------------------------------------------------------------------

    def _endpoint(self, data: dict[str, Any]) -> Endpoint:
        """``data`` as a validated Endpoint, refused with 422 the way the file would be."""
        try:
            endpoint = Endpoint.model_validate(data)
        except ValidationError as exc:
            raise replace(invalid(validation_problems(exc)), code=INVALID_ENDPOINT) from None
        if problem := proxy_problem(endpoint.proxy, self.config.delivery.proxies):
            raise ApiError(422, INVALID_ENDPOINT, problem)
        if not self.config.delivery.allow_private_networks:
            problem = url_host_problem(endpoint.url)
            if problem:
                raise ApiError(422, INVALID_ENDPOINT, f"url refused: {problem}")
        return endpoint

    def _settings(self, endpoint: Endpoint) -> WarrenConfig:
        """The configuration the applier sees: the file's, with ``endpoint`` among its endpoints."""
        others = tuple(e for e in self.config.endpoints if e.name != endpoint.name)
        return self.config.model_copy(update={"endpoints": (*others, endpoint)})

    async def _apply(self, endpoint: Endpoint, *, promoting: bool = False) -> None:
        """``promoting``: a lane endpoint moving to queues of its own (the routing stage is fenced first)."""
        try:
            await self.applier.apply_endpoint(self._settings(endpoint), endpoint, promoting=promoting)
        except BrokerUnavailable as exc:
            raise ApiError(503, BROKER_UNAVAILABLE, f"not applied: {exc}") from exc
        except RoutingUnconfirmed as exc:  # nothing changed; the same request may succeed once routers keep up
            raise ApiError(503, ROUTING_UNCONFIRMED, f"not applied: {exc}") from exc
        except WarrenError as exc:
            raise ApiError(409, REFUSED, f"not applied: {exc}") from exc

    async def served(self, stored: StoredEndpoint) -> Endpoint:
        """The Endpoint workers serve for ``stored``: the file's, or the store's with its signing secrets."""
        if stored.file_managed:
            try:
                return self.config.endpoint(stored.name)
            except KeyError:
                raise ApiError(
                    409, FILE_MANAGED, f"endpoint {stored.name!r} is no longer in the file: run `warren setup`"
                ) from None
        secrets: list[RevealedSecret] = await self._guarded(self.store.signing_secrets(stored.name))
        return to_endpoint(stored, secrets, self.store.sealer.open)

    async def with_stored_endpoints(self) -> WarrenConfig:
        """The configuration with the store's API endpoints beside the file's (for the CLI's list, show, pause)."""
        stored: list[StoredEndpoint] = await self._guarded(self.store.list_endpoints(managed_by=API))
        known = {e.name for e in self.config.endpoints}
        extra = [await self.served(s) for s in stored if s.name not in known]
        return self.config.model_copy(update={"endpoints": (*self.config.endpoints, *extra)})

    async def create(self, data: dict[str, Any], *, tenant: str | None) -> tuple[StoredEndpoint, list[str]]:
        """A new endpoint from ``data`` (Endpoint's fields; ``secret`` and ``signing`` optional): stored and
        applied. Its keys are returned (key_choice.shown_keys says what of them to show)."""
        secret = keys_to_make(data)
        endpoint = self._endpoint({**with_home(data, self.config.lanes), "secret": secret, "tenant": tenant})
        async with self._changing(endpoint.name):
            existing: StoredEndpoint | None = await self._guarded(self.store.get(endpoint.name))
            if (existing is not None and existing.file_managed) or any(
                e.name == endpoint.name for e in self.config.endpoints
            ):
                raise _file_managed(endpoint.name)
            if existing is not None:
                raise ApiError(409, ENDPOINT_EXISTS, f"endpoint {endpoint.name!r} exists already")
            await self._apply(endpoint)
            try:
                stored = await self._guarded(self.store.create(endpoint, tenant=tenant, secret=secret))
            except NameTaken as exc:
                raise ApiError(409, ENDPOINT_EXISTS, str(exc)) from None
            return stored, secret

    async def update(self, name: str, changes: dict[str, Any], *, tenant: str | bool | None = False) -> StoredEndpoint:
        """Change the fields in ``changes``; ``tenant`` False keeps it. Re-applied before it is stored."""
        async with self._changing(name):
            stored = await self.get(name)
            if stored.file_managed:
                raise _file_managed(name)
            current = await self.served(stored)
            data = current.model_dump(exclude_unset=True, exclude={"secret", "tenant"})
            for key, value in changes.items():  # None: back to the default (a required field is then a 422)
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
            data["secret"] = current.secret
            new_tenant = stored.tenant if tenant is False else tenant
            data["tenant"] = new_tenant
            data["home"] = home_after_update(current.home, changes, data, self.config.lanes)
            if (refused := ordered_move(current.home, current.ordering, {"name": name, **data})) is not None:
                raise ApiError(409, REFUSED, refused)
            endpoint = self._endpoint(data)
            await self._apply(endpoint, promoting=current.home == "lane" and endpoint.home == "dedicated")
            updated: StoredEndpoint | None = await self._guarded(
                self.store.update(endpoint, tenant=new_tenant)  # type: ignore[arg-type]
            )
            if updated is None:
                raise not_found(name)
            return updated

    async def delete(self, name: str, *, force: bool = False) -> Removal:
        """Stop delivery and remove the endpoint with its queues and DLQ: only when they are empty, unless ``force``,
        which discards what they hold (counted in the answer)."""
        async with self._changing(name):
            stored = await self.get(name)
            if stored.file_managed:
                raise _file_managed(name)
            try:
                removal = await self.applier.remove_endpoint(
                    self._settings(await self.served(stored)), name, force=force
                )
            except BrokerUnavailable as exc:
                raise ApiError(503, BROKER_UNAVAILABLE, f"not removed: {exc}") from exc
            except WarrenError as exc:
                raise ApiError(409, REFUSED, f"not removed: {exc}") from exc
            await self._guarded(self.store.delete(name))
            return removal or Removal()

    async def rotate(
        self, name: str, *, secret: str | None = None, grace: float | None = None, kind: Scheme | None = None
    ) -> tuple[StoredEndpoint, str]:
        """A new signing secret (HMAC, or an Ed25519 key with ``kind``); the current ones of its scheme keep signing
        for ``grace`` seconds (store.secret_grace)."""
        async with self._changing(name):
            stored = await self.get(name)
            if stored.file_managed:
                raise _file_managed(name)
            current = await self.served(stored)
            text = new_key(secret, kind, current.secret)
            keep = self.config.store.secret_grace if grace is None else grace
            now = time.time()
            # Workers sign with the new secret and every current one from the apply on, each current one until
            # its end (one already ending keeps its end), and stop by themselves then; the store follows.
            secrets = rotated_secrets(current.secret, text, keep, now)
            endpoint = self._endpoint({**current.model_dump(exclude_unset=True, exclude={"secret"}), "secret": secrets})
            await self._apply(endpoint)
            rotated: StoredEndpoint | None = await self._guarded(self.store.rotate(name, text, grace=keep, now=now))
            if rotated is None:
                raise not_found(name)
            return rotated, text

    async def reveal(self, name: str) -> list[RevealedSecret]:
        stored = await self.get(name)
        if stored.file_managed:
            raise ApiError(
                409, FILE_MANAGED, f"endpoint {name!r} comes from the configuration file: its secret is there"
            )
        secrets: list[RevealedSecret] = await self._guarded(self.store.signing_secrets(name))
        return [s for s in secrets if not signs_hidden(s.text)]

    async def public_keys(self, name: str) -> list[StoredSecret]:
        """The endpoint's Ed25519 public keys: the store's, or those of the file's keys (when resolvable here)."""
        stored = await self.get(name)
        if not stored.file_managed:
            return public_keys(stored.secrets)
        try:
            return public_keys(None, (await self.served(stored)).secret)
        except SecretError as exc:
            raise ApiError(409, REFUSED, f"endpoint {name!r}: its keys cannot be read here ({exc})") from None

    async def expire_secrets(self) -> list[str]:
        """Tidy the store: drop the rotated-out secrets whose grace is over. Workers stopped signing with each at
        its end by themselves (the announcement carried it), so nothing is re-applied."""
        done = []
        for name in await self._guarded(self.store.expired()):
            async with self._changing(name):
                if await self._guarded(self.store.drop_expired(name)):
                    done.append(name)
        return done

    async def set_state(self, name: str, action: str, reason: str | None = None) -> tuple[str, bool]:
        """``pause``, ``resume``, ``disable`` or ``enable`` for the whole fleet (as ``warren endpoint pause``)."""
        stored = await self.get(name)
        endpoint = await self.served(stored)
        settings = self._settings(endpoint)
        try:
            async with self.link.connection() as connection:
                change = await change_admin(connection, settings, name, action, reason)
        except BrokerUnavailable as exc:
            raise ApiError(503, BROKER_UNAVAILABLE, f"state not changed: {exc}") from exc
        except AdminError as exc:
            raise ApiError(409, REFUSED, str(exc)) from exc
        self.followed.heard(change.records)
        return (await self.states([name]))[name], bool(change.records)

    async def test(self, name: str, event_type: str = "warren.test", data: Any = None) -> TestResult:
        """Send one signed test event to the endpoint now, as a worker would, and say what came of it."""
        return await self.tester.send(await self.served(await self.get(name)), event_type, data)


def _subscribes(stored: StoredEndpoint, event_type: str) -> bool:
    return any(topic_matches(pattern, event_type) for pattern in stored.events)


@contextlib.asynccontextmanager
async def open_service(config: WarrenConfig, applier: EndpointApplier | None = None) -> AsyncIterator[EndpointService]:
    """The service over the configured store (opened and migrated now), for one command."""
    store = await EndpointStore.open(config.store)
    service = EndpointService(config, store, applier)
    try:
        yield service
    finally:
        await service.close()
        await store.close()
