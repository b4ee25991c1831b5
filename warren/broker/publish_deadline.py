"""How long a publish keeps an unconfirmed event going: a constant of its own, so that ``warren publish --help``
shows the default without importing the publisher (aio-pika, OpenTelemetry)."""

from __future__ import annotations

__all__ = ["DEFAULT_DEADLINE"]

# Seconds an event that was not confirmed (a nack, a lost connection, a node failing over) keeps being sent again,
# from its first send, before it is reported as not stored; the pause between sends doubles from RESEND_PAUSE
# (warren/broker/publisher.py).
DEFAULT_DEADLINE = 30.0
