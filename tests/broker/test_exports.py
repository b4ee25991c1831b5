"""What ``warren.broker`` exports: connecting, publishing, and declaring the topology."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_broker_exports_publishing_and_setup() -> None:
    assert_exports(
        "warren.broker",
        {"Event", "PublishReport", "Publisher", "SetupFailed", "SetupReport", "apply_setup", "connect"},
    )
