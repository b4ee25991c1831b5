"""Warren's exceptions. One root, so callers can catch everything Warren raises on purpose.

Every exception class in the package is drawn here, with the module that defines it when that is not this
one (tests/core/test_errors.py checks that the tree is complete and true):

WarrenError
├── ConfigError              (topology.config) the configuration file or environment is invalid
├── SecretError              (topology.secrets) a secret is malformed or its variable missing; also a ValueError
├── EventError               an event cannot be published as given (bad id, type or key, too large, not JSON)
├── PublishError             RabbitMQ did not take a message: returned as unroutable, nacked, or the link failed
│   ├── UnroutableError      no queue is bound for the message (for an event: nothing subscribes to its type)
│   ├── Nacked               (broker.amqp.confirm) RabbitMQ nacked it (after new channels: broker.amqp.confirm_channel)
│   └── LinkLost             (broker.amqp.confirm) the connection went before the confirm: maybe stored, maybe not
├── BrokerUnavailable        RabbitMQ cannot be reached (connection refused, closed, timed out)
├── TopologyError            the broker's objects differ from the plan, one is missing, or a plugin is
│   └── SetupFailed          (broker.applier) ``warren setup`` cannot apply the plan; carries its report
├── LiveApplyError           a live endpoint change cannot be applied to RabbitMQ as asked
│   ├── EndpointNotEmpty     the endpoint's queues hold messages: removing or re-laying them out is refused
│   └── RoutingUnconfirmed   a promotion's fence: the routing stage did not confirm in time (apply again)
├── SecretsUnavailable       (broker.endpoint_records) a live record's secrets cannot be opened here; a ValueError
├── ManagementError          the management HTTP API refused or failed a request
├── ReplayError              (broker.dlq) a DLQ replay stopped: shovel failed, timed out, or a move was refused
├── ApiError                 (api.ingest.errors) an ingest API error response: status, code, message
├── AdminError               (broker.endpoint_state.admin) an admin change does not apply to the endpoint's state
├── ForbiddenAddress         (transport.egress) the endpoint's address is private and that is not allowed
├── UnknownProxy             (transport.proxying) an endpoint names a proxy not configured here; also a LookupError
├── UnresolvedTarget         (transport.proxying) a proxied endpoint's host did not resolve for the guard (retried)
├── MalformedMessage         (consumers.delivery) a consumed message is not a deliverable envelope (to the DLQ)
├── EndpointBlocked          (consumers.hooks) control flow: a gate holds the attempt back (circuit open, paused)
├── VerificationError        (receiving.errors) an inbound request failed its source's check (401)
├── IdentityError            (receiving.errors) an inbound event's id, key or sequence is unreadable
├── StoreError               (receiving.errors) the idempotency store is unusable
├── HandlerError             (receiving.errors) a ``module:function`` handler cannot be loaded
├── NonRetryable             (receiving.errors) raised by a handler: dead-letter the event now
├── BodyTooLarge             (receiving.middleware) an inbound body over the limit (413)
├── BodyTimeout              (receiving.middleware) an inbound body slower than its read timeout (408)
├── StoreKeyError            (store.keys) the endpoint store's keys are missing, malformed, or open no secret
├── StoreUnavailable         (store.engine) the endpoint store cannot be reached or used
├── NameTaken                (store.repository) an endpoint of that name is stored already
├── LiveApplyMissing         (api.admin.applier) this build cannot apply endpoints to RabbitMQ live
├── MalformedBatch           (store.attempt_records) a message on the attempts queue is not a record batch
├── MalformedRecord          (core.strict_records) a record off RabbitMQ is not what its type asks; also a ValueError
├── FilterError              (core.filters) an endpoint's payload filter is refused, naming where; also a ValueError
└── _Poison                  (api.attempt_writer) control flow: the store refuses a batch for what it holds
"""

from __future__ import annotations

__all__ = [
    "BrokerUnavailable",
    "EndpointNotEmpty",
    "EventError",
    "LiveApplyError",
    "ManagementError",
    "PublishError",
    "ReplayError",
    "RoutingUnconfirmed",
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


class LiveApplyError(WarrenError):
    """A live endpoint change (``warren.broker.live_apply``) cannot be applied as asked; nothing was changed."""


class EndpointNotEmpty(LiveApplyError):
    """The endpoint's queues hold messages: ``queues`` maps each queue that does to its ready-message count."""

    def __init__(self, message: str, queues: dict[str, int]) -> None:
        super().__init__(message)
        self.queues = queues


class RoutingUnconfirmed(LiveApplyError):
    """A lane endpoint's promotion was undone: the routing stage did not confirm, within ``[lanes] promote_wait``,
    that every event it held for the endpoint was routed (warren/broker/partition_fence.py). ``missing``: the route
    partitions that did not answer."""

    def __init__(self, message: str, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing


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
