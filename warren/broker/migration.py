"""Queues declared before the plan gave them a delivery limit and a dead-letter route: migrated by policy.

RabbitMQ refuses to redeclare an existing queue with other arguments (406 PRECONDITION_FAILED), so the
arguments the plan added later (``x-delivery-limit`` on every quorum queue, the dead-letter backstop on the
queues workers consume) reach an older queue through a policy instead, which RabbitMQ applies in place.
Pure functions over management API records; ``warren setup`` puts and deletes the policies.

What the policy gives is what the arguments would have [measured on 3.10.8 and 4.0.5]: with both a
``delivery-limit`` policy and an ``x-delivery-limit`` argument the lower one applies, and the other keys
only ever fill arguments the queue lacks here. Policies are matched by priority and only the highest one
applies to a queue, so Warren's use a priority above the default 0 and name exact queues, never a prefix:
an operator's own catch-all policy keeps applying to everything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from warren.topology.plan import ArgValue, Plan, Queue

__all__ = [
    "POLICY_KEYS",
    "POLICY_PRIORITY",
    "Policy",
    "PolicyCheck",
    "compare_policies",
    "is_warren_policy",
    "migration_policies",
    "missing_arguments",
    "policy_name",
]

# Queue argument -> the policy key that can stand in for it on an existing queue.
POLICY_KEYS = {
    "x-delivery-limit": "delivery-limit",
    "x-dead-letter-exchange": "dead-letter-exchange",
    "x-dead-letter-routing-key": "dead-letter-routing-key",
    "x-dead-letter-strategy": "dead-letter-strategy",
    "x-overflow": "overflow",
}
POLICY_PRIORITY = 10

PolicyStatus = Literal["create", "same", "update", "delete"]


@dataclass(frozen=True)
class Policy:
    """A policy of Warren's: the exact queues it covers and what it gives them."""

    name: str
    queues: tuple[str, ...]
    definition: Mapping[str, ArgValue]
    priority: int = POLICY_PRIORITY
    apply_to: str = "queues"

    @property
    def pattern(self) -> str:
        return "^(" + "|".join(re.escape(q) for q in sorted(self.queues)) + ")$"

    def body(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "definition": dict(self.definition),
            "priority": self.priority,
            "apply-to": self.apply_to,
        }


@dataclass(frozen=True)
class PolicyCheck:
    """A Warren policy and what setup does with it."""

    name: str
    status: PolicyStatus
    policy: Policy | None  # None for one to delete


def missing_arguments(planned: Queue, existing: Mapping[str, Any]) -> dict[str, ArgValue]:
    """The planned arguments a policy can stand in for that the queue on the broker lacks altogether."""
    return {key: value for key, value in planned.arguments.items() if key in POLICY_KEYS and key not in existing}


def _policy_base(prefix: str) -> str:
    return f"{prefix}.limits"


def policy_name(prefix: str, definition: Mapping[str, ArgValue]) -> str:
    """``{prefix}.limits`` for the delivery limit alone; ``{prefix}.limits.{dead-letter key}`` with a route."""
    key = definition.get("dead-letter-routing-key")
    return _policy_base(prefix) if key is None else f"{_policy_base(prefix)}.{key}"


def is_warren_policy(prefix: str, name: str) -> bool:
    base = _policy_base(prefix)
    return name == base or name.startswith(base + ".")


def migration_policies(plan: Plan, prefix: str, queues: Mapping[str, Mapping[str, Any]]) -> list[Policy]:
    """The policies the queues on the broker need, one per distinct definition, each naming its queues exactly.

    ``queues`` are management API records by name. A queue absent from them is created with its arguments
    and needs none; a queue with an argument set to another value is drift, not a migration.
    """
    groups: dict[str, tuple[dict[str, ArgValue], list[str]]] = {}
    for planned in plan.queues:
        record = queues.get(planned.name)
        if record is None:
            continue
        missing = missing_arguments(planned, record.get("arguments") or {})
        if not missing:
            continue
        definition = {POLICY_KEYS[key]: value for key, value in sorted(missing.items())}
        name = policy_name(prefix, definition)
        group = groups.setdefault(name, (definition, []))
        if group[0] == definition:
            group[1].append(planned.name)
        else:  # same route, other gaps (a queue half-declared by hand): a policy of its own
            groups[f"{name}.{planned.name}"] = (definition, [planned.name])
    return [Policy(name, tuple(members), definition) for name, (definition, members) in sorted(groups.items())]


def _same(policy: Policy, record: Mapping[str, Any]) -> bool:
    return (
        record.get("pattern") == policy.pattern
        and (record.get("definition") or {}) == dict(policy.definition)
        and record.get("priority", 0) == policy.priority
        and record.get("apply-to", "all") == policy.apply_to
    )


def compare_policies(wanted: Iterable[Policy], existing: Iterable[Mapping[str, Any]], prefix: str) -> list[PolicyCheck]:
    """Each wanted policy against the broker's, and Warren's policies no queue needs any more (to delete)."""
    ours = {r["name"]: r for r in existing if is_warren_policy(prefix, str(r.get("name", "")))}
    checks = []
    wanted_names = set()
    for policy in wanted:
        wanted_names.add(policy.name)
        record = ours.get(policy.name)
        status: PolicyStatus = "create" if record is None else "same" if _same(policy, record) else "update"
        checks.append(PolicyCheck(policy.name, status, policy))
    checks += [PolicyCheck(name, "delete", None) for name in sorted(set(ours) - wanted_names)]
    return checks
