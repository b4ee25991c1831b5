"""The delivery tests' fixtures (tests/support/delivery.py): a recording receiver, a declared topology, a publisher."""

from tests.support.delivery import endpoint_config, publish, receiver

__all__ = ["endpoint_config", "publish", "receiver"]
