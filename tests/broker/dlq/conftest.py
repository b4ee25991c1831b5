"""The delivery fixtures (receiver, declared config, publisher) for the DLQ tests, which run a worker too."""

from __future__ import annotations

from tests.consumers.conftest import endpoint_config, publish, receiver

__all__ = ["endpoint_config", "publish", "receiver"]
