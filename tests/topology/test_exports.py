"""What ``warren.topology`` exports: the configuration and the planner."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_topology_exports_the_configuration_and_the_planner() -> None:
    assert_exports(
        "warren.topology",
        {"ConfigError", "Endpoint", "Plan", "WarrenConfig", "WebhookSecret", "load_config", "plan_topology"},
    )
