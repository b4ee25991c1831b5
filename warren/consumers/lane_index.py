"""The routing stage's index: which lane endpoints want an event of this tenant and type. Pure, in memory.

RabbitMQ routes a dedicated endpoint's events by its bindings; a lane endpoint has none (docs/architecture.md,
"Lanes"), so the worker's router asks this index. It gives the answer the bindings would: the tenant rules are
``Endpoint.receives_tenant``'s (an endpoint with a tenant gets that tenant's events only; a platform endpoint
tenant-less ones, and every tenant's with ``all_tenants``), and patterns match as a topic exchange matches
them (``topology.topics.topic_matches``, the one implementation).

Fast with 100,000 endpoints: endpoints are filed first by the tenant scope they receive (one tenant's, the
tenant-less events, every tenant's), then by exact event type (a dict lookup), and only their wildcard
patterns are matched one by one, each distinct pattern once however many endpoints share it. An event of one
tenant looks at that tenant's endpoints and the platform's, never at every other tenant's.
"""

from __future__ import annotations

from collections.abc import Iterable

from warren.topology.config import Endpoint
from warren.topology.topics import topic_matches

__all__ = ["SubscriptionIndex"]

_EVERY_TENANT = ("every",)  # the scope of platform endpoints with all_tenants
_NO_TENANT = ("none",)  # the scope of tenant-less events
_MEMO_MAX = 4096  # (tenant, event type) answers kept between changes of the index; past that, it starts afresh


def _wildcard(pattern: str) -> bool:
    return any(word in ("*", "#") for word in pattern.split("."))


class _Scope:
    """The endpoints of one tenant scope: by exact type, and by wildcard pattern."""

    def __init__(self) -> None:
        self.exact: dict[str, set[str]] = {}
        self.patterns: dict[str, set[str]] = {}

    def add(self, name: str, patterns: Iterable[str]) -> None:
        for pattern in patterns:
            table = self.patterns if _wildcard(pattern) else self.exact
            table.setdefault(pattern, set()).add(name)

    def remove(self, name: str, patterns: Iterable[str]) -> None:
        for pattern in patterns:
            table = self.patterns if _wildcard(pattern) else self.exact
            holders = table.get(pattern)
            if holders is not None:
                holders.discard(name)
                if not holders:
                    del table[pattern]

    def matching(self, event_type: str, into: set[str]) -> None:
        into.update(self.exact.get(event_type, ()))
        for pattern, holders in self.patterns.items():
            if topic_matches(pattern, event_type):
                into.update(holders)

    def __bool__(self) -> bool:
        return bool(self.exact or self.patterns)


class SubscriptionIndex:
    """Lane endpoints by what they subscribe to: ``subscribers(tenant, event_type)`` -> the endpoints, by name."""

    def __init__(self, endpoints: Iterable[Endpoint] = ()) -> None:
        self._endpoints: dict[str, Endpoint] = {}
        self._scopes: dict[tuple[str, ...], _Scope] = {}
        self._closed: set[str] = set()  # known, served, but routed to no more (an ordered promotion under way)
        # ``subscribers``' answers since the index last changed: the routing stage asks it once per event, and a
        # deployment's events are of few (tenant, type) pairs. Emptied by every add, remove and close.
        self._memo: dict[tuple[str | None, str], tuple[Endpoint, ...]] = {}
        for endpoint in endpoints:
            self.add(endpoint)

    def __len__(self) -> int:
        return len(self._endpoints)

    def __contains__(self, name: object) -> bool:
        return name in self._endpoints

    def get(self, name: str) -> Endpoint | None:
        return self._endpoints.get(name)

    @staticmethod
    def _scopes_of(endpoint: Endpoint) -> list[tuple[str, ...]]:
        if endpoint.tenant is not None:
            return [("tenant", endpoint.tenant)]
        return [_NO_TENANT, _EVERY_TENANT] if endpoint.all_tenants else [_NO_TENANT]

    def add(self, endpoint: Endpoint) -> None:
        """File ``endpoint`` (replacing an earlier configuration of the same name)."""
        self.remove(endpoint.name)
        self._memo.clear()
        self._endpoints[endpoint.name] = endpoint
        for key in self._scopes_of(endpoint):
            self._scopes.setdefault(key, _Scope()).add(endpoint.name, endpoint.events)

    def remove(self, name: str) -> None:
        endpoint = self._endpoints.pop(name, None)
        if endpoint is None:
            return
        self._memo.clear()
        for key in self._scopes_of(endpoint):
            scope = self._scopes.get(key)
            if scope is not None:
                scope.remove(name, endpoint.events)
                if not scope:
                    del self._scopes[key]

    def close(self, name: str, closed: bool) -> None:
        """Route nothing more to ``name`` (``closed``), or again; it stays known either way (its copies already
        in the lanes are delivered): an ordered endpoint being promoted (warren/broker/ordered_promotion.py)."""
        self._memo.clear()
        if closed:
            self._closed.add(name)
        else:
            self._closed.discard(name)

    def subscribers(self, tenant: str | None, event_type: str) -> list[Endpoint]:
        """The lane endpoints an event of ``tenant`` (None: tenant-less) and ``event_type`` goes to, by name."""
        found = self._memo.get((tenant, event_type))
        if found is None:
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()
            found = self._memo[(tenant, event_type)] = self._subscribers(tenant, event_type)
        return list(found)  # the caller's own: the memo's stays as it is

    def _subscribers(self, tenant: str | None, event_type: str) -> tuple[Endpoint, ...]:
        keys = [_NO_TENANT] if tenant is None else [("tenant", tenant), _EVERY_TENANT]
        found: set[str] = set()
        for key in keys:
            scope = self._scopes.get(key)
            if scope is not None:
                scope.matching(event_type, found)
        # The scopes already hold to receives_tenant; checked again, as the worker checks before each delivery.
        endpoints = (self._endpoints[name] for name in sorted(found - self._closed if self._closed else found))
        return tuple(e for e in endpoints if e.receives_tenant(tenant))
