"""`topology show`'s tree: every planned object appears, in the order a message travels."""

from __future__ import annotations

from typing import Any

import pytest
from rich.tree import Tree

from warren.topology.config import WarrenConfig
from warren.topology.plan import Exchange, Plan, Queue
from warren.topology.planner import plan_topology
from warren.topology.render import human_ms, plan_tree, render_text, summarise_arguments

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def config(**sections: Any) -> WarrenConfig:
    endpoints = [
        {"name": "acme", "url": "https://a.example/", "secret": SECRET, "events": ["message.*"]},
        {
            "name": "billing",
            "url": "https://b.example/",
            "secret": SECRET,
            "events": ["order.paid", "order.refunded"],
            "ordering": "key",
            "partitions": 3,
        },
    ]
    return WarrenConfig(endpoints=endpoints, **sections)


@pytest.fixture
def text() -> str:
    return render_text(plan_topology(config(retry={"base": "200ms", "cap": "2s"})), "warren", width=200)


def test_the_tree_follows_a_message_from_the_events_exchange(text: str) -> None:
    lines = text.splitlines()
    assert lines[0] == "Warren topology (prefix 'warren')  21 exchanges, 21 queues, 35 bindings"
    # events exchange first, then each endpoint exchange with its patterns and type, then its queues
    order = [
        "warren.events (topic)",
        "message.* → warren.ep.acme (fanout)",
        "warren.ep.acme.q — work  [quorum, dead-letters to warren.dead [acme], at-least-once, limit 2^31-1]",
        "order.paid, order.refunded → warren.ep.billing (x-consistent-hash)  hash on header warren-key",
        "warren.ep.billing.p00 — partition 0  [quorum, dead-letters to warren.dead [billing], "
        "at-least-once, limit 2^31-1, single-active-consumer]",
        "warren.ep.billing.p02 — partition 2  [quorum, dead-letters to warren.dead [billing], "
        "at-least-once, limit 2^31-1, single-active-consumer]",
        "delay chain: 11 levels, longest delay 2.047s",
        "warren.delay.due (topic)",
        "#.warren.ep.acme.q → warren.ep.acme.q",
        "warren.dead (direct)",
        "acme → warren.ep.acme.dlq — dead letters  [quorum, limit 2^31-1]",
        "billing → warren.ep.billing.dlq — dead letters  [quorum, limit 2^31-1]",
        "warren.operator (topic)",
    ]
    positions = [next((i for i, line in enumerate(lines) if item in line), -1) for item in order]
    assert -1 not in positions, [item for item, p in zip(order, positions, strict=True) if p == -1]
    assert positions == sorted(positions)


def test_the_delay_chain_is_summarised_not_listed(text: str) -> None:
    # Given 11 delay levels, the tree names the range once instead of 11 queues and 11 exchanges
    assert "warren.delay.l00 … warren.delay.l10 (topic)" in text
    assert "warren.delay.l00.q … warren.delay.l10.q: ttl 2^k ms (1ms, 2ms, 4ms, … 1.024s)" in text
    assert "[quorum, at-least-once, limit 2^31-1]" in text
    assert "warren.delay.l05.q" not in text


def test_every_exchange_and_queue_is_accounted_for() -> None:
    # Given objects the renderer has no special place for
    plan = plan_topology(config())
    extra = Plan(
        (*plan.exchanges, Exchange("warren.control", "fanout")),
        (*plan.queues, Queue("warren.state", {"x-queue-type": "classic", "x-max-length": 1}, role="state")),
        plan.bindings,
        plan.delay_levels,
    )
    # When rendered, then they still appear
    text = render_text(extra, "warren")
    assert "warren.control (fanout)" in text
    assert "warren.state — state  [classic, max length 1]" in text


def test_plan_tree_returns_a_rich_tree_with_the_title() -> None:
    tree = plan_tree(plan_topology(config()), "warren", title="my title")
    assert isinstance(tree, Tree)
    assert "my title" in render_text(plan_topology(config()), "warren", title="my title").splitlines()[0]


def test_classic_queues_show_without_quorum_arguments() -> None:
    text = render_text(plan_topology(config(broker={"queue_type": "classic"})), "warren")
    assert "warren.ep.acme.q — work  [classic]" in text
    assert "at-least-once" not in text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0ms"), (1, "1ms"), (999, "999ms"), (1000, "1s"), (1024, "1.024s"), (60_000, "1m"), (2_097_152, "34m57.152s")],
)
def test_human_ms(ms: int, text: str) -> None:
    assert human_ms(ms) == text


def test_summarise_arguments_puts_the_queue_type_first() -> None:
    phrase = summarise_arguments({"x-single-active-consumer": True, "x-queue-type": "quorum", "x-message-ttl": 8})
    assert phrase == "quorum, ttl 8ms, single-active-consumer"


def test_a_short_chain_lists_every_level_once() -> None:
    # Given a policy whose longest delay needs 3 levels
    text = render_text(plan_topology(WarrenConfig(retry={"base": "1ms", "cap": "5ms"})), "warren", width=200)
    # Then all three TTLs are listed, without an ellipsis
    assert "queues warren.delay.l00.q … warren.delay.l02.q: ttl 2^k ms (1ms, 2ms, 4ms)" in text
    one = render_text(plan_topology(WarrenConfig(retry={"base": "1ms", "cap": "1ms"})), "warren", width=200)
    assert "queues warren.delay.l00.q: ttl 2^k ms (1ms)" in one
