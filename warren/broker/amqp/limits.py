"""AMQP 0-9-1's own limits, where Warren meets them: a module without imports, so that a command's ``--help`` can
show them without loading aio-pika."""

from __future__ import annotations

__all__ = ["MAX_PREFETCH"]

# basic.qos prefetch_count is a 16-bit field: the most messages one channel can hold unacknowledged.
MAX_PREFETCH = 65_535
