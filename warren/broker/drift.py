"""Drift: how the objects on the broker compare with the plan. Pure functions over management API records.

A planned object is ``create`` (absent), ``same`` (present exactly as planned) or ``differs`` (present with
other flags or arguments, which RabbitMQ would refuse with 406 PRECONDITION_FAILED on redeclaration, or
silently keep). Bindings have no "differs": two bindings with other keys or arguments are two bindings.
A queue that only lacks arguments a policy can give (the delivery limit and dead-letter backstop added
later, warren/broker/migration.py) is ``migrate``: setup covers it with a policy instead of failing.

Objects in Warren's own namespaces (``{prefix}.ep.*``, ``{prefix}.delay.*``, the lanes ``{prefix}.lane.<i>``
and the routing stage's ``{prefix}.route``) that the plan no longer has are *leftovers*: queues and exchanges
of endpoints removed from the configuration, delay levels no longer needed, partitions beyond the configured
count, lanes (and their DLQs) beyond ``[lanes] count``, the routing queue once lanes are off, and bindings
the plan dropped (a removed event pattern) between two objects the plan still binds to each other. Names
outside those namespaces are never touched, and neither are the queues the workers declare while they run
(partition claims and rosters, see ``names.is_runtime_queue``) nor bindings between a pair of objects the
plan never binds (an operator's own, such as ``{prefix}.operator`` → an endpoint's exchange).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from warren.broker.migration import POLICY_KEYS
from warren.topology import names
from warren.topology.plan import Binding, Exchange, Plan, Queue

__all__ = [
    "ABSENT",
    "MIGRATE_HINT",
    "Difference",
    "Kind",
    "Leftover",
    "ObjectCheck",
    "Status",
    "binding_label",
    "compare",
    "compare_bindings",
    "compare_exchange",
    "compare_queue",
    "find_leftovers",
]

Kind = Literal["exchange", "queue", "binding"]
Status = Literal["create", "same", "differs", "migrate"]

MIGRATE_HINT = (
    "RabbitMQ cannot add arguments to an existing queue (it refuses the redeclaration with 406), so "
    "`warren setup` gives them to it through a policy of Warren's; the queue and its messages stay"
)


class _Absent:
    """An argument or flag that one side does not have."""

    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


def _show(value: object) -> str:
    if value is ABSENT:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)


def _same(a: object, b: object) -> bool:
    # True == 1 in Python, but not to RabbitMQ: a boolean argument is never equal to a number.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


@dataclass(frozen=True)
class Difference:
    """One flag or argument that differs: its name, the broker's value and the plan's value."""

    field: str
    existing: object
    planned: object

    def describe(self) -> str:
        return f"{self.field} is {_show(self.existing)} on the broker, {_show(self.planned)} in the plan"


@dataclass(frozen=True)
class ObjectCheck:
    """A planned object and how the broker holds it; ``hint`` says how to migrate when it differs."""

    kind: Kind
    name: str
    status: Status
    differences: tuple[Difference, ...] = ()
    hint: str = ""


@dataclass(frozen=True)
class Leftover:
    """An object in Warren's namespaces that the plan no longer has, and why."""

    kind: Kind
    name: str
    reason: str
    endpoint: str | None = None  # the endpoint it belonged to, when it belonged to one
    source: str = ""  # for a binding: its ends and key, to remove it
    destination: str = ""
    destination_type: str = ""
    routing_key: str = ""
    arguments: Mapping[str, Any] | None = None


def binding_label(source: str, destination: str, routing_key: str, arguments: Mapping[str, Any] | None = None) -> str:
    """``a → b [key]``, with the arguments when there are any: how bindings are named in reports."""
    label = f"{source} → {destination} [{routing_key}]"
    if arguments:
        label += " " + ", ".join(f"{k}={_show(v)}" for k, v in sorted(arguments.items()))
    return label


def _diff(fields: Iterable[tuple[str, object, object]]) -> tuple[Difference, ...]:
    return tuple(Difference(name, have, want) for name, have, want in fields if not _same(have, want))


def _argument_diff(existing: Mapping[str, Any], planned: Mapping[str, Any]) -> list[tuple[str, object, object]]:
    keys = sorted(set(existing) | set(planned))
    return [(key, existing.get(key, ABSENT), planned.get(key, ABSENT)) for key in keys]


def _flags(record: Mapping[str, Any], planned: Mapping[str, object]) -> list[tuple[str, object, object]]:
    return [(flag, record.get(flag, ABSENT), want) for flag, want in planned.items()]


def compare_exchange(planned: Exchange, existing: Mapping[str, Any] | None) -> ObjectCheck:
    """One planned exchange against its management API record (None when it does not exist)."""
    if existing is None:
        return ObjectCheck("exchange", planned.name, "create")
    fields: list[tuple[str, object, object]] = [("type", existing.get("type", ABSENT), planned.type)]
    fields += _flags(existing, {"durable": planned.durable, "auto_delete": False, "internal": False})
    fields += _argument_diff(existing.get("arguments") or {}, planned.arguments)
    differences = _diff(fields)
    if not differences:
        return ObjectCheck("exchange", planned.name, "same")
    hint = (
        f"an exchange's type and arguments cannot change in place: delete '{planned.name}' (its bindings go "
        "with it; events published meanwhile are unroutable and the publisher sees the error) and re-run "
        "`warren setup`"
    )
    if planned.type == "x-consistent-hash" or existing.get("type") == "x-consistent-hash":
        hint += "; an endpoint that changes its ordering should be drained first (stop publishing to it, let "
        hint += "its queues empty) so that no event is left in a queue the new plan does not read"
    return ObjectCheck("exchange", planned.name, "differs", differences, hint)


def _queue_arguments(record: Mapping[str, Any]) -> dict[str, Any]:
    arguments = dict(record.get("arguments") or {})
    # A queue declared without x-queue-type is classic; the plan always spells the type out.
    arguments.setdefault("x-queue-type", record.get("type") or "classic")
    return arguments


def compare_queue(planned: Queue, existing: Mapping[str, Any] | None) -> ObjectCheck:
    """One planned queue against its management API record (None when it does not exist)."""
    if existing is None:
        return ObjectCheck("queue", planned.name, "create")
    fields = _flags(existing, {"durable": planned.durable, "auto_delete": False, "exclusive": False})
    fields += _argument_diff(_queue_arguments(existing), planned.arguments)
    differences = _diff(fields)
    if not differences:
        return ObjectCheck("queue", planned.name, "same")
    if all(d.existing is ABSENT and d.field in POLICY_KEYS for d in differences):
        return ObjectCheck("queue", planned.name, "migrate", differences, MIGRATE_HINT)
    if planned.endpoint is None:
        hint = (
            f"queue arguments cannot change in place: '{planned.name}' holds retries in flight for every "
            "endpoint; stop the workers, wait until it is empty (messages 0), delete it and re-run "
            "`warren setup`; or use a new broker prefix"
        )
    else:
        hint = (
            f"queue arguments cannot change in place: stop the workers of endpoint '{planned.endpoint}', let "
            f"'{planned.name}' drain (or move its messages with a shovel), delete it and re-run "
            "`warren setup`; or use a new broker prefix to build the new topology beside the old one"
        )
    return ObjectCheck("queue", planned.name, "differs", differences, hint)


def _binding_key(
    source: str, destination: str, destination_type: str, routing_key: str, arguments: Mapping[str, Any]
) -> tuple[Any, ...]:
    # Bindings are equal only when every part is; typed so that true and 1 stay apart.
    args = tuple(sorted((k, type(v).__name__, repr(v)) for k, v in arguments.items()))
    return (source, destination, destination_type, routing_key, args)


def _record_key(record: Mapping[str, Any]) -> tuple[Any, ...]:
    return _binding_key(
        record.get("source", ""),
        record.get("destination", ""),
        record.get("destination_type", ""),
        record.get("routing_key", ""),
        record.get("arguments") or {},
    )


def _plan_key(binding: Binding) -> tuple[Any, ...]:
    return _binding_key(
        binding.source, binding.destination, binding.destination_type, binding.routing_key, binding.arguments
    )


def compare_bindings(planned: Sequence[Binding], existing: Iterable[Mapping[str, Any]]) -> list[ObjectCheck]:
    """Each planned binding is ``same`` when one with exactly its ends, key and arguments exists."""
    present = {_record_key(record) for record in existing}
    return [
        ObjectCheck(
            "binding",
            binding_label(b.source, b.destination, b.routing_key, b.arguments),
            "same" if _plan_key(b) in present else "create",
        )
        for b in planned
    ]


def compare(
    plan: Plan,
    exchanges: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    bindings: Iterable[Mapping[str, Any]],
) -> list[ObjectCheck]:
    """Every planned object, in plan order (exchanges, queues, bindings), against what the broker has."""
    by_exchange = {record["name"]: record for record in exchanges}
    by_queue = {record["name"]: record for record in queues}
    checks = [compare_exchange(e, by_exchange.get(e.name)) for e in plan.exchanges]
    checks += [compare_queue(q, by_queue.get(q.name)) for q in plan.queues]
    checks += compare_bindings(plan.bindings, bindings)
    return checks


_LEVEL = re.compile(r"\.delay\.l([0-9]+)(?:\.q)?$")  # ASCII: \d would read "l٣" (another script) as level 3
_LANE = re.compile(r"\.lane\.([0-9]+)(?:\.dlq)?")  # a lane or its DLQ, after the prefix (ASCII digits)
_ROUTE_PARTITION = re.compile(r"\.route\.p[0-9]+")  # a route partition, after the prefix
_ORDERED_LANE = re.compile(r"\.lane\.o[0-9]+")  # an ordered lane, after the prefix


def _runtime(kind: Kind, record: Mapping[str, Any], prefix: str) -> bool:
    """A queue a worker declared for itself: by name, or by flags setup never gives (exclusive, auto-delete)."""
    if kind != "queue":
        return False
    return names.is_runtime_queue(prefix, str(record["name"])) or bool(
        record.get("exclusive") or record.get("auto_delete")
    )


def _lane_reason(name: str, prefix: str, lanes: int) -> str | None:
    """Why a lane, a lane's DLQ or the routing stage's queue is not in the plan, or None when it is none of them."""
    if name == names.route_queue(prefix) and lanes:
        return (
            "the single routing queue of an earlier release (now route partitions): workers move what it holds "
            "into them; --prune deletes it once empty"
        )
    if name == names.route_queue(prefix) or name.startswith(f"{names.route_queue(prefix)}."):
        if not lanes:
            return "lanes are off ([lanes] count = 0): no worker routes to lane endpoints"
        if _ROUTE_PARTITION.fullmatch(name[len(prefix) :]):
            return "beyond [lanes] route_partitions: no worker routes from it (raise the count again until it is empty)"
        return None
    ordered = _ORDERED_LANE.fullmatch(name[len(prefix) :]) if name.startswith(prefix) else None
    if ordered is not None:
        return "beyond [lanes] ordered_count, or lanes are off: workers no longer consume this ordered lane"
    lane = _LANE.fullmatch(name[len(prefix) :]) if name.startswith(prefix) else None
    if lane is None:
        return None
    return (
        f"lane {int(lane.group(1))} is beyond [lanes] count = {lanes}: workers no longer consume it (raise the "
        "count again until it is empty; its endpoints are now on other lanes)"
    )


def _leftover_reason(
    name: str, prefix: str, endpoints: set[str], levels: int, lanes: int
) -> tuple[str, str | None] | None:
    """Why an object in Warren's namespaces is not in the plan, or None when it is outside them."""
    lane_reason = _lane_reason(name, prefix, lanes)
    if lane_reason is not None:
        return lane_reason, None
    endpoint_head, delay_head = f"{prefix}.ep.", f"{prefix}.delay."
    if name.startswith(endpoint_head):
        endpoint = name[len(endpoint_head) :].split(".", 1)[0]
        if endpoint not in endpoints:
            return f"endpoint '{endpoint}' is no longer configured", endpoint
        return f"no longer in the plan of endpoint '{endpoint}' (its ordering or partitions changed)", endpoint
    if name.startswith(delay_head):
        level = _LEVEL.search(name)
        if level and int(level.group(1)) >= levels:
            return f"delay level {int(level.group(1))} is no longer needed (the plan has {levels} levels)", None
        return "not in the plan", None
    return None


def find_leftovers(
    plan: Plan,
    prefix: str,
    exchanges: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    bindings: Iterable[Mapping[str, Any]],
    now_ms: int | None = None,
) -> list[Leftover]:
    """Objects in Warren's namespaces on the broker that the plan does not have (see the module docstring).

    A binding that carries ``x-warren-until`` (a demoted endpoint's retries turned to its lane) is none until then.
    """
    endpoints = {q.endpoint for q in plan.queues if q.endpoint}
    planned_exchanges = {e.name for e in plan.exchanges}
    planned_queues = {q.name for q in plan.queues}
    lanes = sum(1 for q in plan.queues if _LANE.fullmatch(q.name[len(prefix) :]) and not q.name.endswith(".dlq"))
    found: list[Leftover] = []
    kinds: tuple[tuple[Kind, Iterable[Mapping[str, Any]], set[str]], ...] = (
        ("exchange", exchanges, planned_exchanges),
        ("queue", queues, planned_queues),
    )
    for kind, records, planned in kinds:
        for record in sorted(records, key=lambda r: str(r["name"])):
            name = record["name"]
            if name in planned or _runtime(kind, record, prefix):
                continue
            why = _leftover_reason(name, prefix, endpoints, plan.delay_levels, lanes)
            if why is not None:
                found.append(Leftover(kind, name, why[0], why[1]))
    planned_pairs = {(b.source, b.destination) for b in plan.bindings}
    planned_bindings = {_plan_key(b) for b in plan.bindings}
    for record in bindings:
        source, destination = record.get("source", ""), record.get("destination", "")
        # Only bindings between two objects the plan binds to each other: the others go with the leftover
        # object they touch, or belong to someone else (a user's own queue bound to the events exchange, or
        # the operator exchange bound to an endpoint's exchange, is none of setup's business).
        if (source, destination) not in planned_pairs:
            continue
        if _record_key(record) in planned_bindings:
            continue
        arguments = record.get("arguments") or {}
        until = arguments.get(names.UNTIL_ARGUMENT)
        if isinstance(until, int) and (now_ms if now_ms is not None else time.time() * 1000) < until:
            continue  # a demoted endpoint's retries may still come due under it (warren/broker/live_demote.py)
        found.append(
            Leftover(
                "binding",
                binding_label(source, destination, record.get("routing_key", ""), arguments),
                "not in the plan (an event pattern or a partition was removed?)",
                source=source,
                destination=destination,
                destination_type=record.get("destination_type", "queue"),
                routing_key=record.get("routing_key", ""),
                arguments=arguments,
            )
        )
    return found
