"""Migrating queues declared before the delivery limit and backstop existed: pure, on hand-written records."""

from __future__ import annotations

from typing import Any

from warren.broker.drift import compare_queue
from warren.broker.migration import POLICY_KEYS, compare_policies, migration_policies
from warren.topology.config import WarrenConfig
from warren.topology.plan import Plan, Queue
from warren.topology.planner import DELIVERY_LIMIT, plan_topology

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _plan() -> Plan:
    return plan_topology(
        WarrenConfig(
            broker={"prefix": "w"},
            endpoints=[
                {"name": "acme", "url": "https://example.com/a", "secret": SECRET, "events": ["#"]},
                {
                    "name": "bill",
                    "url": "https://example.com/b",
                    "secret": SECRET,
                    "events": ["#"],
                    "ordering": "key",
                    "partitions": 2,
                },
            ],
        )
    )


def _old(queue: Queue) -> dict[str, Any]:
    """The record of ``queue`` as Warren declared it before: none of the arguments a policy can give."""
    arguments = {k: v for k, v in queue.arguments.items() if k not in POLICY_KEYS or k == "x-dead-letter-exchange"}
    if "x-message-ttl" not in arguments:  # only the delay queues had a dead-letter route
        arguments.pop("x-dead-letter-exchange", None)
    else:
        arguments["x-dead-letter-strategy"] = "at-least-once"
        arguments["x-overflow"] = "reject-publish"
    return {"name": queue.name, "durable": True, "auto_delete": False, "exclusive": False, "arguments": arguments}


def test_a_queue_lacking_only_policy_keys_is_migrated_not_drift() -> None:
    plan = _plan()
    work = plan.queue("w.ep.acme.q")
    # Given the work queue as declared before the limit and backstop existed
    check = compare_queue(work, _old(work))
    # Then it is to migrate, listing what it lacks, and setup is not stopped by it
    assert check.status == "migrate"
    assert {d.field for d in check.differences} == {
        "x-delivery-limit",
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
        "x-dead-letter-strategy",
        "x-overflow",
    }
    assert "policy" in check.hint


def test_a_different_limit_is_drift_not_a_migration() -> None:
    # Given a queue whose limit argument was set to something else (a policy could only lower it further)
    work = _plan().queue("w.ep.acme.q")
    record = {**_old(work), "arguments": {**work.arguments, "x-delivery-limit": 20}}
    # Then it differs: setup must say so and stop, not paper over it
    assert compare_queue(work, record).status == "differs"


def test_old_queues_get_one_policy_per_route_naming_exact_queues() -> None:
    plan = _plan()
    records = {q.name: _old(q) for q in plan.queues if q.arguments.get("x-queue-type") == "quorum"}
    policies = {p.name: p for p in migration_policies(plan, "w", records)}
    # Then the work queue and each ordered endpoint's partitions get their route to their own DLQ ...
    # (the attempt log's queues drop their oldest batch when full, an overflow of their own: a route each)
    assert set(policies) == {
        "w.limits",
        "w.limits.acme",
        "w.limits.bill",
        "w.limits.w.attempts",
        "w.limits.w.attempts.rejected",
    }
    assert dict(policies["w.limits.w.attempts"].definition) == {
        "delivery-limit": DELIVERY_LIMIT,
        "overflow": "drop-head",
    }
    assert dict(policies["w.limits.bill"].definition) == {
        "dead-letter-exchange": "w.dead",
        "dead-letter-routing-key": "bill",
        "dead-letter-strategy": "at-least-once",
        "delivery-limit": DELIVERY_LIMIT,
        "overflow": "reject-publish",
    }
    assert policies["w.limits.bill"].pattern == r"^(w\.ep\.bill\.p00|w\.ep\.bill\.p01)$"
    # ... and every other quorum queue (DLQs, delay levels) the limit alone
    assert dict(policies["w.limits"].definition) == {"delivery-limit": DELIVERY_LIMIT}
    assert "w.ep.acme.dlq" in policies["w.limits"].queues and "w.delay.l00.q" in policies["w.limits"].queues
    # And the body is what the management API takes, above the default priority
    assert policies["w.limits"].body()["apply-to"] == "queues" and policies["w.limits"].body()["priority"] > 0


def test_queues_declared_with_the_plan_need_no_policy() -> None:
    plan = _plan()
    records = {q.name: {"name": q.name, "arguments": dict(q.arguments)} for q in plan.queues}
    assert migration_policies(plan, "w", records) == []


def test_policies_compare_as_create_same_update_and_stale_ones_are_deleted() -> None:
    plan = _plan()
    records = {"w.ep.acme.dlq": _old(plan.queue("w.ep.acme.dlq"))}
    (wanted,) = migration_policies(plan, "w", records)
    same = {"name": wanted.name, **wanted.body()}
    assert [c.status for c in compare_policies([wanted], [], "w")] == ["create"]
    assert [c.status for c in compare_policies([wanted], [same], "w")] == ["same"]
    assert [c.status for c in compare_policies([wanted], [{**same, "priority": 0}], "w")] == ["update"]
    # A Warren policy no queue needs goes; an operator's own policy is never touched
    stale = [{"name": "w.limits.gone", "pattern": "^x$"}, {"name": "ops-ha", "pattern": ".*"}]
    checks = compare_policies([], stale, "w")
    assert [(c.name, c.status) for c in checks] == [("w.limits.gone", "delete")]
