"""Where the admin API lives and when it is on; light on imports, so the ingest API loads the rest only when on."""

from __future__ import annotations

from warren.topology.config import WarrenConfig

__all__ = ["ADMIN_PREFIX", "EVENT_ATTEMPTS", "EVENT_TYPES_PREFIX", "TENANTS_PREFIX", "admin_enabled", "is_admin_path"]

ADMIN_PREFIX = "/v1/endpoints"
TENANTS_PREFIX = "/v1/tenants"  # a tenant's API keys: /v1/tenants/{tenant}/keys
EVENT_TYPES_PREFIX = "/v1/event-types"  # the event-type catalog
EVENT_ATTEMPTS = "/v1/events/{event_id}/attempts"  # the attempt log of one event: an admin route too


def admin_enabled(config: WarrenConfig) -> bool:
    """Both a store (``store.url``) and admin tokens (``api.admin_tokens``) are configured."""
    return config.store.url is not None and bool(config.api.admin_tokens)


_PREFIXES = (ADMIN_PREFIX, TENANTS_PREFIX, EVENT_TYPES_PREFIX)


def is_admin_path(path: str) -> bool:
    if any(
        path == prefix or path.startswith(prefix + "/") for prefix in (ADMIN_PREFIX, TENANTS_PREFIX, EVENT_TYPES_PREFIX)
    ):
        return True
    parts = path.split("/")  # "", "v1", "events", <id>, "attempts"
    return len(parts) == 5 and parts[1:3] == ["v1", "events"] and parts[4] == "attempts" and parts[3] != ""
