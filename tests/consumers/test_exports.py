"""What ``warren.consumers`` exports: the delivery worker."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_consumers_exports_the_worker() -> None:
    assert_exports("warren.consumers", {"Worker"})
