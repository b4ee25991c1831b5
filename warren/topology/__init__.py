"""Warren's topology: configuration and the pure planner that turns it into RabbitMQ objects.

Pure: it imports nothing but ``warren.core`` (docs/architecture.md, "The map"). The rest of the package
(names, delays, backoff, definitions export) is importable from its own module. The exports below load on first
use (``warren.core.lazy``): ``warren.topology.names`` does not import pydantic.
"""

from __future__ import annotations

import typing as _typing

from warren.core.lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from warren.topology.config import ConfigError, Endpoint, WarrenConfig, load_config
    from warren.topology.plan import Plan
    from warren.topology.planner import plan_topology
    from warren.topology.secrets import WebhookSecret

__all__ = ["ConfigError", "Endpoint", "Plan", "WarrenConfig", "WebhookSecret", "load_config", "plan_topology"]

__getattr__ = _exports(
    __name__,
    {
        "ConfigError": "warren.topology.config",
        "Endpoint": "warren.topology.config",
        "WarrenConfig": "warren.topology.config",
        "load_config": "warren.topology.config",
        "Plan": "warren.topology.plan",
        "plan_topology": "warren.topology.planner",
        "WebhookSecret": "warren.topology.secrets",
    },
)
