"""The delivery tests' fixtures (tests/support/delivery.py): a recording receiver, a declared topology, a publisher;
and a deployment for moving an ordered endpoint between homes (tests/support/ordered_moves.py)."""

from tests.support.delivery import endpoint_config, publish, receiver
from tests.support.ordered_moves import failing_once

__all__ = ["endpoint_config", "failing_once", "publish", "receiver"]
