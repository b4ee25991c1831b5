"""What ``warren.consumers`` exports: the delivery worker and its transport seam."""

from __future__ import annotations

from tests.support.exports import assert_exports


def test_consumers_exports_the_worker_and_the_transport_seam() -> None:
    assert_exports("warren.consumers", {"SendResult", "Transport", "Worker"})
