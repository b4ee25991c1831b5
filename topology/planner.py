"""The planner: configuration in, Plan out. Pure: no I/O, same input, same plan."""

from __future__ import annotations

from warren.topology import names
from warren.topology.config import Endpoint, InboundSource, WarrenConfig
from warren.topology.delays import level_count
from warren.topology.headers import H_KEY
from warren.topology.plan import Arguments, Binding, Exchange, Plan, Queue

__all__ = ["HASH_HEADER", "consumed_queues", "delay_levels", "plan_topology", "queue_arguments"]

# The consistent-hash exchange hashes this header, never the routing key: the routing key is the event
# type, and hashing it would put every event of a type in one partition. The publisher always sets it
# (to the ordering key, or to the event id when there is none), because a missing header silently sends
# everything to one partition.
HASH_HEADER = H_KEY


def queue_arguments(
    queue_type: str,
    *,
    single_active_consumer: bool = False,
    message_ttl_ms: int | None = None,
    dead_letter_exchange: str | None = None,
) -> Arguments:
    """The ``x-`` arguments of one queue, built in one place so that every queue of a kind is alike."""
    args: dict[str, str | int | bool] = {"x-queue-type": queue_type}
    if single_active_consumer:
        args["x-single-active-consumer"] = True
    if message_ttl_ms is not None:
        # This HAS to be a fixed value per queue: RabbitMQ expires messages from the head only, so a
        # per-message TTL would hold a short delay behind a long one.
        args["x-message-ttl"] = message_ttl_ms
    if dead_letter_exchange is not None:
        args["x-dead-letter-exchange"] = dead_letter_exchange
        if queue_type == "quorum":
            # Without both, a quorum queue dead-letters at-most-once and a message can vanish in transit.
            args["x-dead-letter-strategy"] = "at-least-once"
            args["x-overflow"] = "reject-publish"
    return args


def consumed_queues(prefix: str, endpoint: Endpoint) -> tuple[str, ...]:
    """The queues a worker consumes for ``endpoint``: its partitions (ordered by key) or its work queue."""
    if endpoint.ordering == "key":
        return tuple(names.partition_queue(prefix, endpoint.name, index) for index in range(endpoint.partition_count))
    return (names.work_queue(prefix, endpoint.name),)


def delay_levels(config: WarrenConfig) -> int:
    """How many binary delay levels the longest delay of any retry policy in the configuration needs."""
    longest = max([config.retry.longest_delay] + [e.retry_policy(config.retry).longest_delay for e in config.endpoints])
    longest = max([longest] + [s.retry_policy(config.retry).longest_delay for s in config.inbound])
    return level_count(longest)


def _endpoint_objects(config: WarrenConfig, endpoint: Endpoint) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    ex_name = names.endpoint_exchange(prefix, endpoint.name)
    bindings = [Binding(names.events_exchange(prefix), ex_name, "exchange", pattern) for pattern in endpoint.events]
    queues: list[Queue] = []
    if endpoint.ordering == "key":
        exchange = Exchange(ex_name, "x-consistent-hash", {"hash-header": HASH_HEADER})
        for index, name in enumerate(consumed_queues(prefix, endpoint)):
            queue = Queue(
                name,
                queue_arguments(qtype, single_active_consumer=True),
                role=f"partition {index}",
                endpoint=endpoint.name,
            )
            queues.append(queue)
            bindings.append(Binding(ex_name, queue.name, "queue", "1"))
    else:
        exchange = Exchange(ex_name, "fanout")
        work = Queue(
            consumed_queues(prefix, endpoint)[0],
            queue_arguments(qtype),
            role="work",
            endpoint=endpoint.name,
        )
        queues.append(work)
        bindings.append(Binding(ex_name, work.name, "queue"))
        bindings.append(Binding(names.delay_due_exchange(prefix), work.name, "queue", f"#.{work.name}"))
    # No delivery limit and no TTL on the DLQ: listing it must never count against or expire a message.
    dead = Queue(names.dlq(prefix, endpoint.name), queue_arguments(qtype), role="dead letters", endpoint=endpoint.name)
    queues.append(dead)
    bindings.append(Binding(names.dead_exchange(prefix), dead.name, "queue", endpoint.name))
    return [exchange], queues, bindings


def _inbound_objects(config: WarrenConfig, source: InboundSource) -> tuple[list[Queue], list[Binding]]:
    """A received-webhooks queue per source, fed by ``warren receive`` through the default exchange."""
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    queue = Queue(names.inbound_queue(prefix, source.name), queue_arguments(qtype), role=f"inbound {source.name}")
    dead = Queue(
        names.inbound_dlq(prefix, source.name), queue_arguments(qtype), role=f"inbound {source.name} dead letters"
    )
    bindings = [
        # Retries of a failed handler come back through the delay chain, like outgoing deliveries.
        Binding(names.delay_due_exchange(prefix), queue.name, "queue", f"#.{queue.name}"),
        Binding(names.dead_exchange(prefix), dead.name, "queue", names.inbound_dead_key(source.name)),
    ]
    return [queue, dead], bindings


def _delay_objects(prefix: str, qtype: str, levels: int) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    exchanges = [Exchange(names.delay_due_exchange(prefix), "topic")]
    queues: list[Queue] = []
    bindings: list[Binding] = []
    for level in range(levels):
        below = names.delay_exchange(prefix, level - 1) if level else names.delay_due_exchange(prefix)
        exchange = Exchange(names.delay_exchange(prefix, level), "topic")
        queue = Queue(
            names.delay_queue(prefix, level),
            queue_arguments(qtype, message_ttl_ms=1 << level, dead_letter_exchange=below),
            role=f"delay 2^{level} ms",
        )
        skip = "*." * level
        exchanges.append(exchange)
        queues.append(queue)
        bindings.append(Binding(exchange.name, queue.name, "queue", f"{skip}1.#"))
        bindings.append(Binding(exchange.name, below, "exchange", f"{skip}0.#"))
    return exchanges, queues, bindings


# The endpoint-state stream keeps every state change; size-bounded, so old segments go. Records are a few
# hundred bytes; workers re-append the records still in force every hour (consumers/health/state_store.py),
# so a disabled endpoint's record is never among those dropped.
STATE_STREAM_MAX_BYTES = 16 * 1024 * 1024
STATE_STREAM_SEGMENT_BYTES = 1024 * 1024


def _health_objects(prefix: str) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """Endpoint health: the control exchange every worker listens on, and the stream that remembers."""
    control = Exchange(names.control_exchange(prefix), "fanout")
    state = Queue(
        names.state_queue(prefix),
        {
            "x-queue-type": "stream",
            "x-max-length-bytes": STATE_STREAM_MAX_BYTES,
            "x-stream-max-segment-size-bytes": STATE_STREAM_SEGMENT_BYTES,
        },
        role="endpoint states (stream)",
    )
    return [control], [state], [Binding(control.name, state.name, "queue")]


def plan_topology(config: WarrenConfig) -> Plan:
    """Every exchange, queue and binding the configuration needs."""
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    levels = delay_levels(config)
    exchanges = [
        Exchange(names.events_exchange(prefix), "topic"),
        Exchange(names.dead_exchange(prefix), "direct"),
        Exchange(names.operator_exchange(prefix), "topic"),
    ]
    delay_exchanges, queues, bindings = _delay_objects(prefix, qtype, levels)
    exchanges += delay_exchanges
    for endpoint in config.endpoints:
        e, q, b = _endpoint_objects(config, endpoint)
        exchanges += e
        queues += q
        bindings += b
    for source in config.inbound:
        q, b = _inbound_objects(config, source)
        queues += q
        bindings += b
    e, q, b = _health_objects(prefix)
    exchanges += e
    queues += q
    bindings += b
    return Plan(tuple(exchanges), tuple(queues), tuple(bindings), levels)
