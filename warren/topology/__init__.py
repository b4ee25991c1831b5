"""Warren's topology: configuration and the pure planner that turns it into RabbitMQ objects.

Pure: it imports nothing but ``warren.core`` (docs/architecture.md, "The map"). The rest of the package
(names, delays, backoff, definitions export) is importable from its own module.
"""

from __future__ import annotations

from warren.topology.config import ConfigError, Endpoint, WarrenConfig, load_config
from warren.topology.plan import Plan
from warren.topology.planner import plan_topology
from warren.topology.secrets import WebhookSecret

__all__ = ["ConfigError", "Endpoint", "Plan", "WarrenConfig", "WebhookSecret", "load_config", "plan_topology"]
