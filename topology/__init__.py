"""Warren's topology: configuration and the pure planner that turns it into RabbitMQ objects.

The bottom layer: it imports nothing from ``warren.broker`` or ``warren.consumers``. The rest of the package
(names, delays, backoff, definitions export, the error classes) is importable from its own module.
"""

from __future__ import annotations

from warren.topology.config import ConfigError, Endpoint, WarrenConfig, load_config
from warren.topology.plan import Plan
from warren.topology.planner import plan_topology
from warren.topology.secrets import WebhookSecret

__all__ = ["ConfigError", "Endpoint", "Plan", "WarrenConfig", "WebhookSecret", "load_config", "plan_topology"]
