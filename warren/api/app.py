"""The application ``warren api`` serves: the ingest API, with the admin API when it is configured, and the
attempt log's writer running beside them when there is a store. The one place that knows all three."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from warren.api.admin.applier import EndpointApplier
from warren.api.admin.paths import admin_enabled, is_admin_path
from warren.api.ingest.app import create_ingest_app
from warren.api.ingest.link import BrokerLink
from warren.topology.config import WarrenConfig

__all__ = ["create_app"]


def create_app(
    config: WarrenConfig, link: BrokerLink | None = None, applier: EndpointApplier | None = None
) -> web.Application:
    """The whole API; it starts ``link`` (made from ``config.broker`` unless given) and closes it on cleanup.

    With ``store.url`` and ``api.admin_tokens`` set it carries the admin API too (``applier`` for tests); with
    ``store.url`` the attempt log's writer runs beside it, sharing the admin API's store when both are on.
    """

    def extend(app: web.Application, document: dict[str, Any]) -> None:
        shared = None
        if admin_enabled(config):  # the store's libraries load only then
            from warren.api.admin.app import add_admin_routes
            from warren.api.admin.openapi import add_admin_paths

            shared = add_admin_routes(app, config, applier)
            add_admin_paths(document)
        if config.store.url is not None:
            from warren.api.attempt_writer import add_attempt_writer

            add_attempt_writer(app, config, shared)

    return create_ingest_app(config, link, exempt=is_admin_path, extend=extend)
