"""The planner: configuration in, Plan out. Pure: no I/O, same input, same plan."""

from __future__ import annotations

from warren.topology import names
from warren.topology.config import Endpoint, InboundSource, WarrenConfig
from warren.topology.delays import level_count
from warren.topology.headers import H_KEY
from warren.topology.plan import Arguments, Binding, Exchange, Plan, Queue
from warren.topology.settings import LaneSettings

__all__ = [
    "DELIVERY_LIMIT",
    "HASH_HEADER",
    "LANE_DELAY_REACH",
    "consumed_queues",
    "delay_levels",
    "endpoint_plan",
    "plan_topology",
    "queue_arguments",
    "subscription_bindings",
]

# The consistent-hash exchange hashes this header, never the routing key: the routing key is the event
# type, and hashing it would put every event of a type in one partition. The publisher always sets it
# (to the ordering key, or to the event id when there is none), because a missing header silently sends
# everything to one partition.
HASH_HEADER = H_KEY

# Every quorum queue counts the times a message goes back to it (a closed channel, a nack with requeue, a
# worker that died) and drops the message, or dead-letters it, past its delivery limit. RabbitMQ 4.x sets
# 20 when the queue names none; 3.10 sets none, and reads -1 ("unlimited" on 4.x) as "drop at the first
# return". The largest value the argument's type holds keeps messages on both: at one return a second, a
# message would need 68 years to spend it. docs/architecture.md, "Delivery limits", has the measurements.
DELIVERY_LIMIT = 2**31 - 1

# With lanes on, the delay chain reaches at least this far (seconds), whatever the retry policies: a lane's parks
# wait up to 30 s (warren/consumers/lanes.py, PARK_DELAY_MAX) and the routing stage's retries up to a minute
# (warren/consumers/route_attempts.py, ROUTE_DELAY_CAP). A chain built for a short `[retry] cap` alone cut them to
# it: every park of a held endpoint came back after the cap. 16 levels (65.5 s); the default cap (1 h) needs 22.
LANE_DELAY_REACH = 60.0


def queue_arguments(
    queue_type: str,
    *,
    single_active_consumer: bool = False,
    message_ttl_ms: int | None = None,
    dead_letter_exchange: str | None = None,
    dead_letter_routing_key: str | None = None,
) -> Arguments:
    """The ``x-`` arguments of one queue, built in one place so that every queue of a kind is alike."""
    args: dict[str, str | int | bool] = {"x-queue-type": queue_type}
    if queue_type == "quorum":
        args["x-delivery-limit"] = DELIVERY_LIMIT
    if single_active_consumer:
        args["x-single-active-consumer"] = True
    if message_ttl_ms is not None:
        # This HAS to be a fixed value per queue: RabbitMQ expires messages from the head only, so a
        # per-message TTL would hold a short delay behind a long one.
        args["x-message-ttl"] = message_ttl_ms
    if dead_letter_exchange is not None:
        args["x-dead-letter-exchange"] = dead_letter_exchange
        if dead_letter_routing_key is not None:
            args["x-dead-letter-routing-key"] = dead_letter_routing_key
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
    """How many binary delay levels the longest delay of any retry policy in the configuration needs, and, with
    lanes on, the lanes' own waits (``LANE_DELAY_REACH``) whatever the retry policies are."""
    longest = max([config.retry.longest_delay] + [e.retry_policy(config.retry).longest_delay for e in config.endpoints])
    longest = max([longest] + [s.retry_policy(config.retry).longest_delay for s in config.inbound])
    if config.lanes.count:
        longest = max(longest, LANE_DELAY_REACH)
    return level_count(longest)


def _backstop(prefix: str, qtype: str, dead_key: str) -> Arguments:
    """Arguments of a queue workers consume: a message that ever reaches the delivery limit becomes a dead letter.

    The route is the one Warren's own dead letters take (``{prefix}.dead``, keyed to land in the right DLQ),
    at least once; RabbitMQ records why in ``x-death`` (reason ``delivery_limit``), which ``warren dlq`` shows.
    Only quorum queues have a delivery limit, so only they get the route.
    """
    if qtype != "quorum":
        return queue_arguments(qtype)
    return queue_arguments(qtype, dead_letter_exchange=names.dead_exchange(prefix), dead_letter_routing_key=dead_key)


def subscription_bindings(prefix: str, endpoint: Endpoint) -> list[Binding]:
    """What feeds ``endpoint``'s exchange: its event patterns, bound where its events are published.

    Tenant-less events go to the events exchange keyed by type (as before tenants existed); events that name
    a tenant go to the tenants exchange keyed ``<tenant>.<type>``. A tenant's endpoint binds ``<tenant>.<pattern>``
    there and nothing on the events exchange; a platform endpoint binds its patterns on the events exchange
    and, with ``all_tenants``, ``*.<pattern>`` on the tenants exchange (``*`` is exactly one word: any tenant).
    """
    ex_name = names.endpoint_exchange(prefix, endpoint.name)
    tenants = names.tenants_exchange(prefix)
    if endpoint.tenant is not None:
        return [
            Binding(tenants, ex_name, "exchange", names.tenant_routing_key(endpoint.tenant, pattern))
            for pattern in endpoint.events
        ]
    bindings = [Binding(names.events_exchange(prefix), ex_name, "exchange", pattern) for pattern in endpoint.events]
    if endpoint.all_tenants:
        bindings += [
            Binding(tenants, ex_name, "exchange", names.tenant_routing_key("*", pattern)) for pattern in endpoint.events
        ]
    return bindings


def _endpoint_objects(config: WarrenConfig, endpoint: Endpoint) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    if endpoint.home == "lane":
        return [], [], []  # a lane endpoint owns nothing on the broker: the lanes and the routing stage serve it
    backstop = _backstop(prefix, qtype, endpoint.name)
    ex_name = names.endpoint_exchange(prefix, endpoint.name)
    bindings = subscription_bindings(prefix, endpoint)
    queues: list[Queue] = []
    if endpoint.ordering == "key":
        exchange = Exchange(ex_name, "x-consistent-hash", {"hash-header": HASH_HEADER})
        for index, name in enumerate(consumed_queues(prefix, endpoint)):
            queue = Queue(
                name,
                {**backstop, **queue_arguments(qtype, single_active_consumer=True)},
                role=f"partition {index}",
                endpoint=endpoint.name,
            )
            queues.append(queue)
            bindings.append(Binding(ex_name, queue.name, "queue", "1"))
    else:
        exchange = Exchange(ex_name, "fanout")
        work = Queue(
            consumed_queues(prefix, endpoint)[0],
            backstop,
            role="work",
            endpoint=endpoint.name,
        )
        queues.append(work)
        bindings.append(Binding(ex_name, work.name, "queue"))
        bindings.append(Binding(names.delay_due_exchange(prefix), work.name, "queue", f"#.{work.name}"))
    # No TTL and no dead-letter route on the DLQ, and the largest delivery limit: listing it returns each
    # message once, and that must never drop or expire one (warren/broker/dlq/browse.py).
    dead = Queue(names.dlq(prefix, endpoint.name), queue_arguments(qtype), role="dead letters", endpoint=endpoint.name)
    queues.append(dead)
    bindings.append(Binding(names.dead_exchange(prefix), dead.name, "queue", endpoint.name))
    return [exchange], queues, bindings


def _inbound_objects(config: WarrenConfig, source: InboundSource) -> tuple[list[Queue], list[Binding]]:
    """A received-webhooks queue per source, fed by ``warren receive`` through the default exchange."""
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    dead_key = names.inbound_dead_key(source.name)
    queue = Queue(
        names.inbound_queue(prefix, source.name), _backstop(prefix, qtype, dead_key), role=f"inbound {source.name}"
    )
    dead = Queue(
        names.inbound_dlq(prefix, source.name), queue_arguments(qtype), role=f"inbound {source.name} dead letters"
    )
    bindings = [
        # Retries of a failed handler come back through the delay chain, like outgoing deliveries.
        Binding(names.delay_due_exchange(prefix), queue.name, "queue", f"#.{queue.name}"),
        Binding(names.dead_exchange(prefix), dead.name, "queue", dead_key),
    ]
    return [queue, dead], bindings


def _lane_objects(prefix: str, qtype: str, lanes: LaneSettings) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """The lanes (docs/architecture.md, "Lanes"): shared queues, a DLQ each, ordered lanes, the router's input.

    A lane is consumed like a work queue: retries come back to it through the delay chain by its name, and its
    dead letters go to the dead exchange keyed ``lane.<i>``, so that each lane's DLQ holds only its lane's.
    The router's input takes every event of both exchanges (``#``) into a consistent-hash exchange on
    ``warren-key`` over ``route_partitions`` partitions (single active consumer, claimed per router): it alone
    decides which lane endpoints subscribe, from its index, so the broker holds no binding per lane endpoint.
    Ordered lanes (single active consumer) hold ordered lane endpoints' copies; they never see the delay chain.
    """
    queues: list[Queue] = []
    bindings: list[Binding] = []
    for lane in range(lanes.count):
        dead_key = names.lane_dead_key(lane)
        queue = Queue(names.lane_queue(prefix, lane), _backstop(prefix, qtype, dead_key), role=f"lane {lane}")
        dead = Queue(names.lane_dlq(prefix, lane), queue_arguments(qtype), role=f"lane {lane} dead letters")
        queues += [queue, dead]
        bindings.append(Binding(names.delay_due_exchange(prefix), queue.name, "queue", f"#.{queue.name}"))
        bindings.append(Binding(names.dead_exchange(prefix), dead.name, "queue", dead_key))
    sac = queue_arguments(qtype, single_active_consumer=True)
    for lane in range(lanes.ordered_count):
        queues.append(Queue(names.ordered_lane_queue(prefix, lane), sac, role=f"ordered lane {lane}"))
    # The router's partitions are consumed like partitions: an event whose copies keep failing is retried in place
    # when an ordered endpoint is owed, else comes back through the delay chain by its partition's name; past
    # [lanes] route_attempts it goes to the routing stage's DLQ.
    route_key = names.route_dead_key()
    route = Exchange(names.route_exchange(prefix), "x-consistent-hash", {"hash-header": HASH_HEADER})
    bindings.append(Binding(names.events_exchange(prefix), route.name, "exchange", "#"))
    bindings.append(Binding(names.tenants_exchange(prefix), route.name, "exchange", "#"))
    for index in range(lanes.route_partitions):
        name = names.route_partition(prefix, index)
        args = {**_backstop(prefix, qtype, route_key), **sac}
        queues.append(Queue(name, args, role=f"routing stage partition {index} (lane endpoints)"))
        bindings.append(Binding(route.name, name, "queue", "1"))
        bindings.append(Binding(names.delay_due_exchange(prefix), name, "queue", f"#.{name}"))
    route_dead = Queue(names.route_dlq(prefix), queue_arguments(qtype), role="routing stage dead letters")
    queues.append(route_dead)
    bindings.append(Binding(names.dead_exchange(prefix), route_dead.name, "queue", route_key))
    return [route], queues, bindings


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
# hundred bytes; workers re-append the records still in force every hour (warren/broker/endpoint_state/stream.py),
# so a disabled endpoint's record is never among those dropped.
STATE_STREAM_MAX_BYTES = 16 * 1024 * 1024
STATE_STREAM_SEGMENT_BYTES = 1024 * 1024


def _remembered_broadcast(
    exchange: str, stream: str, max_bytes: int, segment_bytes: int, role: str
) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """A fanout exchange every worker listens on, and a size-bounded stream bound to it that remembers."""
    arguments: Arguments = {
        "x-queue-type": "stream",
        "x-max-length-bytes": max_bytes,
        "x-stream-max-segment-size-bytes": segment_bytes,
    }
    queue = Queue(stream, arguments, role=role)
    return [Exchange(exchange, "fanout")], [queue], [Binding(exchange, stream, "queue")]


def _health_objects(prefix: str) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """Endpoint health: the control exchange every worker listens on, and the stream that remembers."""
    return _remembered_broadcast(
        names.control_exchange(prefix),
        names.state_queue(prefix),
        STATE_STREAM_MAX_BYTES,
        STATE_STREAM_SEGMENT_BYTES,
        "endpoint states (stream)",
    )


# The endpoints stream holds full endpoint configurations (a few hundred bytes to a few KB each); workers
# re-append the latest record of every live endpoint hourly (warren/consumers/live_endpoints.py), so retention only
# ever drops superseded ones.
ENDPOINTS_STREAM_MAX_BYTES = 64 * 1024 * 1024
ENDPOINTS_STREAM_SEGMENT_BYTES = 4 * 1024 * 1024


def _live_objects(prefix: str) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """Live endpoints: the exchange their configurations are announced on, and the stream that remembers them."""
    return _remembered_broadcast(
        names.endpoints_exchange(prefix),
        names.endpoints_stream(prefix),
        ENDPOINTS_STREAM_MAX_BYTES,
        ENDPOINTS_STREAM_SEGMENT_BYTES,
        "live endpoint configurations (stream)",
    )


# The attempt log's queue is bounded, so that it never grows without end while no writer runs (no `warren api`
# with a store): past either bound RabbitMQ drops the oldest batches (drop-head), never a publish. A batch is
# a few hundred bytes a record; 256 MiB holds about a million attempts. The rejected queue keeps the last
# malformed batches for an operator to read (docs/endpoints.md, "The attempt log").
ATTEMPTS_MAX_LENGTH = 1_000_000
ATTEMPTS_MAX_BYTES = 256 * 1024 * 1024
ATTEMPTS_REJECTED_MAX_LENGTH = 10_000


def _bounded(arguments: Arguments, max_length: int, max_bytes: int | None = None) -> Arguments:
    bounded: dict[str, str | int | bool] = {**arguments, "x-max-length": max_length, "x-overflow": "drop-head"}
    if max_bytes is not None:
        bounded["x-max-length-bytes"] = max_bytes
    return bounded


def _attempt_log_objects(prefix: str, qtype: str) -> tuple[list[Exchange], list[Queue], list[Binding]]:
    """The attempt log's carrier: workers publish record batches to a fanout exchange; one queue holds them
    until the writer (in ``warren api``) stores them. Durable like the work queues: a record is not lost while
    the writer or the store is down, it waits (up to the queue's bound, above). Beside it, the queue where the
    writer moves what it cannot store."""
    exchange, queue = names.attempts_exchange(prefix), names.attempts_queue(prefix)
    rejected = names.attempts_rejected_queue(prefix)
    return (
        [Exchange(exchange, "fanout")],
        [
            Queue(queue, _bounded(queue_arguments(qtype), ATTEMPTS_MAX_LENGTH, ATTEMPTS_MAX_BYTES), role="attempt log"),
            Queue(rejected, _bounded(queue_arguments(qtype), ATTEMPTS_REJECTED_MAX_LENGTH), role="attempt log rejects"),
        ],
        [Binding(exchange, queue, "queue")],
    )


def endpoint_plan(config: WarrenConfig, endpoint: Endpoint) -> Plan:
    """The objects of one endpoint alone (its exchange, queues and bindings): what a live apply declares."""
    exchanges, queues, bindings = _endpoint_objects(config, endpoint)
    return Plan(tuple(exchanges), tuple(queues), tuple(bindings), delay_levels(config))


def plan_topology(config: WarrenConfig) -> Plan:
    """Every exchange, queue and binding the configuration needs."""
    prefix, qtype = config.broker.prefix, config.broker.queue_type
    levels = delay_levels(config)
    exchanges = [
        Exchange(names.events_exchange(prefix), "topic"),
        Exchange(names.tenants_exchange(prefix), "topic"),
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
    if config.lanes.count:
        e, q, b = _lane_objects(prefix, qtype, config.lanes)
        exchanges += e
        queues += q
        bindings += b
    for source in config.inbound:
        q, b = _inbound_objects(config, source)
        queues += q
        bindings += b
    for objects in (_health_objects(prefix), _live_objects(prefix), _attempt_log_objects(prefix, qtype)):
        e, q, b = objects
        exchanges += e
        queues += q
        bindings += b
    return Plan(tuple(exchanges), tuple(queues), tuple(bindings), levels)
