"""Warren's exceptions. One root, so callers can catch everything Warren raises on purpose.

WarrenError
├── ConfigError              (topology.config) the configuration file or environment is invalid
├── EventError               an event cannot be published as given (bad type, too large, not JSON)
├── PublishError             RabbitMQ did not take an event: returned as unroutable, nacked, or the link failed
│   └── UnroutableError      no queue is bound for the event's type (nothing subscribes to it)
├── BrokerUnavailable        RabbitMQ cannot be reached (connection refused, closed, timed out)
├── TopologyError            the broker's objects differ from the plan, or a plugin is missing
├── ManagementError          the management HTTP API refused or failed a request
└── ReplayError              (broker.dlq) a DLQ replay stopped: shovel failed, timed out, or a move was refused
"""

from __future__ import annotations

__all__ = [
    "BrokerUnavailable",
    "EventError",
    "ManagementError",
    "PublishError",
    "ReplayError",
    "TopologyError",
    "UnroutableError",
    "WarrenError",
    "describe",
]


class WarrenError(Exception):
    """The root of every error Warren raises on purpose."""


class EventError(WarrenError, ValueError):
    """An event cannot be published as given."""


class PublishError(WarrenError):
    """RabbitMQ did not confirm an event: ``event_id`` says which."""

    def __init__(self, message: str, event_id: str | None = None) -> None:
        super().__init__(message)
        self.event_id = event_id


class UnroutableError(PublishError):
    """The event's type matches no binding: no endpoint subscribes to it, so it would be lost."""


class BrokerUnavailable(WarrenError):
    """RabbitMQ cannot be reached."""


class TopologyError(WarrenError):
    """The broker's objects differ from the plan, or a needed plugin is missing."""


class ManagementError(WarrenError):
    """The management API failed; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ReplayError(WarrenError):
    """A DLQ replay stopped before it finished; whatever was not moved is still in the DLQ."""


def describe(exc: BaseException) -> str:
    """An exception as a short text for a message: its own words, or its type when it has none."""
    return str(exc) or type(exc).__name__
