"""What ``import warren`` offers: the short public surface the README lists."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_warren_exports_exactly_the_producer_api() -> None:
    # Given the top-level package, When its exports are read, Then they are exactly these names
    assert_exports(
        "warren",
        {
            "BrokerUnavailable",
            "ConfigError",
            "Event",
            "EventError",
            "PublishError",
            "PublishReport",
            "Publisher",
            "UnroutableError",
            "WarrenConfig",
            "WarrenError",
            "__version__",
            "connect",
            "load_config",
        },
    )
