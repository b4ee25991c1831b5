"""Where the admin API lives and when it is on; light on imports, so the ingest API loads the rest only when on."""

from __future__ import annotations

from warren.topology.config import WarrenConfig

__all__ = ["ADMIN_PREFIX", "admin_enabled", "is_admin_path"]

ADMIN_PREFIX = "/v1/endpoints"


def admin_enabled(config: WarrenConfig) -> bool:
    """Both a store (``store.url``) and admin tokens (``api.admin_tokens``) are configured."""
    return config.store.url is not None and bool(config.api.admin_tokens)


def is_admin_path(path: str) -> bool:
    return path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")
