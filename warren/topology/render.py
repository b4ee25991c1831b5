"""The plan as a readable tree, for ``warren topology show``: pure, a rich ``Tree`` or plain text.

The tree follows a message: the events exchange, each endpoint's exchange (type and event patterns) and its
queues (role and the arguments that matter), the delay chain summarised (it is many alike objects), the
dead-letter exchange and its DLQs, then anything else the plan holds so that nothing declared is hidden.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Iterable

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from warren.topology import names
from warren.topology.plan import Arguments, ArgValue, Binding, Exchange, Plan, Queue
from warren.topology.planner import DELIVERY_LIMIT

__all__ = ["human_ms", "plan_tree", "render_text", "summarise_arguments"]


def human_ms(ms: int) -> str:
    """``1ms``, ``512ms``, ``1.024s``, ``34m57.152s``, ``1h9m54.303s``: exact, for TTLs of the delay chain."""
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{seconds}s" if rest else "")


# How each argument reads in the tree; the value is appended unless the entry says otherwise.
_ARGUMENT_LABELS: dict[str, str] = {
    "x-message-ttl": "ttl",
    "x-dead-letter-exchange": "dead-letters to",
    "x-dead-letter-routing-key": "dead-letter key",
    "x-delivery-limit": "delivery limit",
    "x-max-length": "max length",
    "hash-header": "hash on header",
}


def _argument(key: str, value: ArgValue) -> str:
    if key == "x-queue-type":
        return str(value)
    if key == "x-single-active-consumer":
        return "single-active-consumer" if value else "competing consumers"
    if key == "x-dead-letter-strategy" or key == "x-overflow":
        return str(value)
    if key == "x-delivery-limit" and value == DELIVERY_LIMIT:
        return "limit 2^31-1"
    if key == "x-message-ttl" and isinstance(value, int):
        return f"ttl {human_ms(value)}"
    return f"{_ARGUMENT_LABELS.get(key, key)} {value}"


def summarise_arguments(arguments: Arguments) -> str:
    """The arguments as a short phrase: ``quorum, single-active-consumer``; queue type first.

    A dead-letter route reads ``dead-letters to X [key]``; at-least-once implies reject-publish (RabbitMQ
    requires it), so that one is not repeated.
    """
    shown = dict(arguments)
    key = shown.pop("x-dead-letter-routing-key", None)
    if key is not None and "x-dead-letter-exchange" in shown:
        shown["x-dead-letter-exchange"] = f"{shown['x-dead-letter-exchange']} [{key}]"
    elif key is not None:
        shown["x-dead-letter-routing-key"] = key
    if shown.get("x-dead-letter-strategy") == "at-least-once" and shown.get("x-overflow") == "reject-publish":
        del shown["x-overflow"]
    keys = sorted(shown, key=lambda k: (k != "x-queue-type", k))
    return ", ".join(_argument(k, shown[k]) for k in keys)


def _label(name: str, kind: str, detail: str = "") -> Text:
    text = Text()
    text.append(name, style="bold")
    text.append(f" ({kind})", style="cyan")
    if detail:
        text.append(f"  {detail}", style="dim")
    return text


def _queue_label(queue: Queue) -> Text:
    text = Text()
    text.append(queue.name, style="green")
    role = f" — {queue.role}" if queue.role else ""
    text.append(role)
    arguments = summarise_arguments(queue.arguments)
    if arguments:
        text.append(f"  [{arguments}]", style="dim")
    if not queue.durable:
        text.append("  transient", style="yellow")
    return text


def _exchange_detail(exchange: Exchange) -> str:
    return summarise_arguments(exchange.arguments)


def _span(first: str, last: str) -> str:
    return first if first == last else f"{first} … {last}"


def _from(bindings: Iterable[Binding], source: str) -> list[Binding]:
    return [b for b in bindings if b.source == source]


class _Builder:
    """Walks the plan once, remembering what it has shown so that leftovers can be listed at the end."""

    def __init__(self, plan: Plan, prefix: str, live: Collection[str] = ()) -> None:
        self.plan = plan
        self.prefix = prefix
        self.live = {names.endpoint_exchange(prefix, name) for name in live}
        self.exchanges = {e.name: e for e in plan.exchanges}
        self.queues = {q.name: q for q in plan.queues}
        self.shown: set[str] = set()

    def queue_node(self, parent: Tree, name: str, key: str = "") -> None:
        queue = self.queues.get(name)
        label = _queue_label(queue) if queue else Text(f"{name} (not in the plan)", style="red")
        if key:
            label = Text(f"{key} → ", style="magenta") + label
        parent.add(label)
        self.shown.add(name)

    def events(self, root: Tree) -> None:
        """The two exchanges producers publish to: tenant-less events, then events that name a tenant."""
        sources = (
            (names.events_exchange(self.prefix), "producers publish here; routing key = event type"),
            (names.tenants_exchange(self.prefix), "events for a tenant; routing key = <tenant>.<event type>"),
        )
        for name, detail in sources:
            exchange = self.exchanges.get(name)
            if exchange is None:
                continue
            self.shown.add(name)
            node = root.add(_label(name, exchange.type, detail))
            patterns: dict[str, list[str]] = {}
            for binding in _from(self.plan.bindings, name):
                patterns.setdefault(binding.destination, []).append(binding.routing_key)
            for destination, keys in patterns.items():
                if destination in self.shown:  # an all_tenants endpoint, drawn under the events exchange
                    node.add(Text(", ".join(keys), style="magenta") + Text(f" → {destination} (above)"))
                else:
                    self.endpoint(node, destination, keys)

    def endpoint(self, parent: Tree, name: str, patterns: list[str]) -> None:
        exchange = self.exchanges.get(name)
        kind = exchange.type if exchange else "not in the plan"
        detail = _exchange_detail(exchange) if exchange else ""
        label = Text(", ".join(patterns), style="magenta") + Text(" → ") + _label(name, kind, detail)
        if name in self.live:
            label.append("  live (api-managed)", style="yellow")
        node = parent.add(label)
        self.shown.add(name)
        for binding in _from(self.plan.bindings, name):
            if binding.destination_type == "queue":
                # On a consistent-hash exchange the key is the partition's weight on the ring, not a pattern;
                # equal weights (the planner's "1") are the norm and not worth a column.
                hashed = kind == "x-consistent-hash"
                weight = f"weight {binding.routing_key}" if hashed and binding.routing_key != "1" else ""
                self.queue_node(node, binding.destination, weight)
            else:
                node.add(Text(f"{binding.routing_key or '(any)'} → {binding.destination} (exchange)"))

    def delays(self, root: Tree) -> None:
        levels = self.plan.delay_levels
        due = names.delay_due_exchange(self.prefix)
        chain = [self.queues.get(names.delay_queue(self.prefix, k)) for k in range(levels)]
        ttls = [q.arguments.get("x-message-ttl") for q in chain if q is not None]
        if not levels or not ttls:
            return
        longest = sum(t for t in ttls if isinstance(t, int))
        summary = f"delay chain: {levels} level{'s' if levels != 1 else ''}, longest delay {human_ms(longest)}"
        node = root.add(Text(summary, style="bold"))
        first, last = names.delay_exchange(self.prefix, 0), names.delay_exchange(self.prefix, levels - 1)
        node.add(
            Text(f"exchanges {_span(first, last)} (topic): enter at {last}; the routing key spells the delay in binary")
        )
        first_q, last_q = names.delay_queue(self.prefix, 0), names.delay_queue(self.prefix, levels - 1)
        sample = chain[-1] or chain[0]
        arguments = {k: v for k, v in (sample.arguments if sample else {}).items() if k not in _PER_LEVEL}
        shown = [human_ms(t) if isinstance(t, int) else str(t) for t in ttls]
        if len(shown) > 4:
            shown = [*shown[:3], f"… {shown[-1]}"]
        node.add(
            Text(f"queues {_span(first_q, last_q)}: ttl 2^k ms ({', '.join(shown)})")
            + Text(f"  [{summarise_arguments(arguments)}]", style="dim")
        )
        returns = [b for b in _from(self.plan.bindings, due) if b.destination_type == "queue"]
        back = node.add(_label(due, self.exchanges[due].type if due in self.exchanges else "?", "back by routing key"))
        for binding in returns:
            back.add(Text(f"{binding.routing_key} → {binding.destination}"))
        self.shown.update(
            {due, *(q.name for q in chain if q), *(names.delay_exchange(self.prefix, k) for k in range(levels))}
        )

    def dead(self, root: Tree) -> None:
        name = names.dead_exchange(self.prefix)
        exchange = self.exchanges.get(name)
        if exchange is None:
            return
        self.shown.add(name)
        node = root.add(_label(name, exchange.type, "exhausted or non-retryable messages; key = endpoint"))
        for binding in _from(self.plan.bindings, name):
            self.queue_node(node, binding.destination, binding.routing_key)

    def leftovers(self, root: Tree) -> None:
        for exchange in self.plan.exchanges:
            if exchange.name not in self.shown:
                node = root.add(_label(exchange.name, exchange.type, _exchange_detail(exchange)))
                for binding in _from(self.plan.bindings, exchange.name):
                    self.queue_node(node, binding.destination, binding.routing_key)
                self.shown.add(exchange.name)
        for queue in self.plan.queues:
            if queue.name not in self.shown:
                root.add(_queue_label(queue))
                self.shown.add(queue.name)


# Arguments that differ from one delay level to the next, left out of the chain's common summary.
_PER_LEVEL = frozenset({"x-message-ttl", "x-dead-letter-exchange"})


def plan_tree(plan: Plan, prefix: str, title: str | None = None, live: Collection[str] = ()) -> Tree:
    """The plan as a tree: events → endpoints → queues, the delay chain, the dead letters, the rest.

    ``live`` names endpoints that are live (created through the admin API), marked so beside the file's."""
    counts = f"{len(plan.exchanges)} exchanges, {len(plan.queues)} queues, {len(plan.bindings)} bindings"
    root = Tree(Text(title or f"Warren topology (prefix {prefix!r})", style="bold") + Text(f"  {counts}", style="dim"))
    builder = _Builder(plan, prefix, live)
    builder.events(root)
    builder.delays(root)
    builder.dead(root)
    builder.leftovers(root)
    return root


def render_text(plan: Plan, prefix: str, title: str | None = None, width: int = 120, live: Collection[str] = ()) -> str:
    """The tree as plain text (no colour), for tests, logs and files."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False, soft_wrap=False)
    console.print(plan_tree(plan, prefix, title, live))
    return buffer.getvalue()
