"""``warren setup``: apply the plan to RabbitMQ, all or nothing.

The order matters. First check what the broker can do (plugins) and what it already has (drift, through
the management API); only when nothing differs from the plan is anything declared, so a failed setup never
leaves half a topology. Then declare every planned object through AMQP, which is idempotent for objects that
are already there as planned. Last, report (or with ``prune``, delete) the leftovers the plan dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiormq.exceptions

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, Nodes, connect, connect_once, nodes_text
from warren.broker.capacity import capacity_problems, read_nodes
from warren.broker.declare import declare_plan, to_create
from warren.broker.drift import Kind, Leftover, ObjectCheck, compare, find_leftovers
from warren.broker.live_set import announced_endpoints, with_live_endpoints
from warren.broker.management import ManagementClient
from warren.broker.migration import Policy, PolicyCheck, compare_policies, migration_policies
from warren.broker.prune import LeftoverOutcome, preview, prune, report_only
from warren.broker.setup_promotion import fence_file_moves
from warren.core.errors import BrokerUnavailable, TopologyError
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.plan import Plan
from warren.topology.planner import plan_topology

__all__ = [
    "PLUGIN_EXCHANGE_TYPES",
    "SetupFailed",
    "SetupReport",
    "apply_setup",
    "check_plugins",
    "counts",
    "declare_plan",
    "plugin_problems",
]

# Exchange types that only a plugin provides: the plugin to enable for each.
PLUGIN_EXCHANGE_TYPES = {"x-consistent-hash": "rabbitmq_consistent_hash_exchange"}


def plugin_problems(plan: Plan | None, available: Iterable[str]) -> list[str]:
    """What the broker lacks for ``plan`` (or, without a plan, for any plan Warren makes), one line each."""
    have = set(available)
    needed: dict[str, list[str]] = {kind: [] for kind in PLUGIN_EXCHANGE_TYPES} if plan is None else {}
    for exchange in plan.exchanges if plan is not None else ():
        needed.setdefault(exchange.type, []).append(exchange.name)
    problems = []
    for kind, users in needed.items():
        if kind in have:
            continue
        plugin = PLUGIN_EXCHANGE_TYPES.get(kind)
        used_by = f" (needed by {', '.join(users)})" if users else ""
        if plugin is None:
            problems.append(f"exchange type '{kind}'{used_by} is not available on the broker")
        else:
            problems.append(
                f"exchange type '{kind}'{used_by} is not available: the RabbitMQ plugin {plugin} is not enabled; "
                f"enable it with `rabbitmq-plugins enable {plugin}` (Warren enables nothing by itself)"
            )
    return problems


async def check_plugins(management: ManagementClient, plan: Plan | None = None) -> list[str]:
    """Problems with the broker's plugins for ``plan``; an empty list when everything needed is there."""
    return plugin_problems(plan, await management.exchange_types())


@dataclass
class SetupReport:
    """What setup found and did. ``objects`` lists every planned object in plan order."""

    vhost: str
    prefix: str
    dry_run: bool = False
    prune: bool = False
    plugin_problems: list[str] = field(default_factory=list)
    capacity_problems: list[str] = field(default_factory=list)  # nodes that could not hold the new queues
    objects: list[ObjectCheck] = field(default_factory=list)
    leftovers: list[LeftoverOutcome] = field(default_factory=list)
    policies: list[PolicyCheck] = field(default_factory=list)  # Warren's migration policies
    warnings: list[str] = field(default_factory=list)
    applied: bool = False  # whether anything was declared (False on a dry run and on failure)

    def count(self, kind: Kind, status: str) -> int:
        return sum(1 for o in self.objects if o.kind == kind and o.status == status)

    @property
    def drift(self) -> list[ObjectCheck]:
        return [o for o in self.objects if o.status == "differs"]

    @property
    def to_create(self) -> list[ObjectCheck]:
        return [o for o in self.objects if o.status == "create"]

    @property
    def migrating(self) -> list[ObjectCheck]:
        """Existing queues that get the plan's new arguments through a policy in this run."""
        return [o for o in self.objects if o.status == "migrate"]

    @property
    def policy_changes(self) -> list[PolicyCheck]:
        return [p for p in self.policies if p.status != "same"]

    @property
    def deleted(self) -> list[LeftoverOutcome]:
        return [x for x in self.leftovers if x.action == "deleted"]

    @property
    def ok(self) -> bool:
        return not self.drift and not self.plugin_problems and not self.capacity_problems

    @property
    def no_change(self) -> bool:
        """Nothing to create, nothing different, nothing deleted (leftovers may still be reported)."""
        return (
            self.ok
            and not self.to_create
            and not self.migrating
            and not self.policy_changes
            and not self.deleted
            and not any(x.action == "would delete" for x in self.leftovers)
        )

    def failure_message(self) -> str:
        """Every problem, one per line, with how to fix each: the message of SetupFailed."""
        problems = len(self.plugin_problems) + len(self.capacity_problems) + len(self.drift)
        lines = [
            f"setup stopped before declaring anything (vhost '{self.vhost}', prefix '{self.prefix}'): "
            f"{problems} problem{'s' if problems != 1 else ''}"
        ]
        lines += [f"  {problem}" for problem in self.plugin_problems + self.capacity_problems]
        for check in self.drift:
            lines.append(f"  {check.kind} '{check.name}' differs from the plan:")
            lines += [f"    - {difference.describe()}" for difference in check.differences]
            lines.append(f"    how to migrate: {check.hint}")
        return "\n".join(lines)


class SetupFailed(TopologyError):
    """The broker cannot take the plan as it is (drift, a missing plugin, no room); nothing was declared."""

    def __init__(self, report: SetupReport) -> None:
        super().__init__(report.failure_message())
        self.report = report


# Listing a vhost of thousands of objects takes seconds on a busy node: setup waits longer than other commands.
MANAGEMENT_TIMEOUT = 60.0


@dataclass(frozen=True)
class _BrokerState:
    exchanges: dict[str, dict[str, Any]]
    queues: dict[str, dict[str, Any]]
    bindings: list[dict[str, Any]]
    policies: list[dict[str, Any]]


async def _read_state(api: ManagementClient) -> _BrokerState:
    """What the vhost holds, in a fixed number of API calls however large the plan.

    Without statistics: they cost the broker most of the answer's time (6,000 queues with statistics took
    more than 10 s on a busy 3.10 node), and setup needs none but the message counts of leftovers, which
    ``_leftover_counts`` reads for those few alone. The lists without statistics read the tables themselves,
    so they do not lag a just-declared object.
    """
    if not await api.vhost_exists():
        raise TopologyError(
            f"vhost '{api.vhost}' does not exist on the broker: create it (`rabbitmqctl add_vhost {api.vhost}` "
            "and grant the user permissions) or fix the vhost in broker.url"
        )
    exchanges = {record["name"]: record for record in await api.exchanges(stats=False)}
    queues = {record["name"]: record for record in await api.queues(stats=False)}
    bindings = [b for b in await api.bindings() if b.get("source")]  # "" is the default exchange's
    return _BrokerState(exchanges, queues, bindings, await api.policies())


async def _leftover_counts(api: ManagementClient, leftovers: Iterable[Leftover], state: _BrokerState) -> None:
    """Give the leftover queues their message and consumer counts (one call each; leftovers are few)."""
    for leftover in leftovers:
        if leftover.kind == "queue" and (record := await api.queue(leftover.name)) is not None:
            state.queues[leftover.name] = record


def _settle(checks: list[ObjectCheck], wanted: Iterable[Policy], policies: Iterable[PolicyCheck]) -> list[ObjectCheck]:
    """A queue to migrate whose policy is already in place as planned is migrated: report it as the same."""
    done = {p.name for p in policies if p.status == "same"}
    covered = {queue for policy in wanted if policy.name in done for queue in policy.queues}
    return [
        ObjectCheck(c.kind, c.name, "same") if c.kind == "queue" and c.status == "migrate" and c.name in covered else c
        for c in checks
    ]


async def _apply_policies(api: ManagementClient, checks: Iterable[PolicyCheck]) -> None:
    for check in checks:
        if check.status == "delete":
            await api.delete_policy(check.name)
        elif check.status != "same" and check.policy is not None:
            await api.put_policy(check.name, check.policy.body())


def _partition_warnings(plan: Plan, checks: list[ObjectCheck], leftovers: Iterable[Leftover]) -> list[str]:
    """A live consistent-hash exchange whose partitions change remaps keys: say so, it breaks order."""
    status = {(c.kind, c.name): c.status for c in checks}
    warnings = []
    for exchange in plan.exchanges:
        if exchange.type != "x-consistent-hash" or status.get(("exchange", exchange.name)) != "same":
            continue
        added = any(
            c.kind == "binding" and c.status == "create" and c.name.startswith(f"{exchange.name} → ") for c in checks
        )
        removed = any(x.kind == "queue" and x.name.startswith(f"{exchange.name}.p") for x in leftovers)
        if added or removed:
            warnings.append(
                f"the partitions of '{exchange.name}' change while it exists: some ordering keys move to another "
                "partition, and events of a moving key already queued can be delivered out of order; drain the "
                "endpoint first when strict order matters"
            )
    return warnings


def _still_fed_warnings(
    plan: Plan, prefix: str, leftovers: Iterable[Leftover], bindings: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Leftovers still bound from a planned exchange keep receiving events that no worker of the plan reads."""
    # The delay chain's last hop is left out: it only returns retries already in flight.
    sources = {e.name for e in plan.exchanges} - {names.delay_due_exchange(prefix)}
    left = {x.name for x in leftovers if x.kind != "binding"}
    fed: dict[str, list[str]] = {}
    for record in bindings:
        if record.get("destination") in left and record.get("source") in sources:
            fed.setdefault(record["destination"], []).append(record["source"])
    return [
        f"'{name}' is not in the plan but still bound from {', '.join(sorted(set(via)))}: it keeps receiving "
        "events that no worker reads; setup with --prune unbinds it (and deletes it when empty)"
        for name, via in sorted(fed.items())
    ]


async def _check_amqp(nodes: Nodes) -> None:
    """A dry run compares through the management API; it gates a deploy only if AMQP, which declares, works too."""
    try:
        connection = await connect_once(nodes, name="warren-setup-dry-run")
    except BrokerUnavailable as exc:
        raise BrokerUnavailable(f"dry run could not be completed: {exc}") from exc
    await connection.close()


async def _with_live(config: WarrenConfig) -> WarrenConfig:
    """``config`` and the live endpoints; unchanged when AMQP cannot be reached (the steps after report that)."""
    try:
        connection = await connect_once(config.broker.urls, name="warren-setup-live")
    except BrokerUnavailable:
        return config
    try:
        return with_live_endpoints(config, await announced_endpoints(connection, config.broker.prefix))
    finally:
        await connection.close()


async def apply_setup(
    config: WarrenConfig,
    *,
    dry_run: bool = False,
    prune_leftovers: bool = False,
    force: bool = False,
    plan: Plan | None = None,
    check_capacity: bool = True,
) -> SetupReport:
    """Check, then declare the plan of ``config``; report leftovers and, with ``prune_leftovers``, delete them.

    Raises SetupFailed (with the report) when a plugin is missing, an object differs from the plan, or (unless
    ``check_capacity`` is False) a node could not hold the new quorum queues, before declaring anything;
    BrokerUnavailable or ManagementError when the broker cannot be reached.

    Without an explicit ``plan``, the live endpoints the broker remembers (warren/broker/live_set.py) are planned beside
    the file's, so that they are never reported or pruned as leftovers.
    """
    if plan is None:
        config = await _with_live(config)
        plan = plan_topology(config)
    broker = config.broker
    report = SetupReport(broker.vhost, broker.prefix, dry_run=dry_run, prune=prune_leftovers)
    async with ManagementClient.from_settings(broker, timeout=MANAGEMENT_TIMEOUT) as api:
        report.plugin_problems = await check_plugins(api, plan)
        state = await _read_state(api)
        leftovers = find_leftovers(plan, broker.prefix, state.exchanges.values(), state.queues.values(), state.bindings)
        await _leftover_counts(api, leftovers, state)
        if check_capacity:
            new = sum(1 for q in plan.queues if q.name not in state.queues and q.arguments["x-queue-type"] == "quorum")
            report.capacity_problems = capacity_problems(await read_nodes(api), new)
    wanted = migration_policies(plan, broker.prefix, state.queues)
    report.policies = compare_policies(wanted, state.policies, broker.prefix)
    report.objects = _settle(
        compare(plan, state.exchanges.values(), state.queues.values(), state.bindings), wanted, report.policies
    )
    report.leftovers = report_only(leftovers, state.queues)
    report.warnings = _partition_warnings(plan, report.objects, leftovers)
    if dry_run or not prune_leftovers:  # pruning unbinds them
        report.warnings += _still_fed_warnings(plan, broker.prefix, leftovers, state.bindings)
    if not report.ok:
        raise SetupFailed(report)
    if dry_run:
        await _check_amqp(broker.urls)
        if prune_leftovers:
            report.leftovers = preview(leftovers, state.queues, force)
        return report
    if report.policy_changes:
        async with ManagementClient.from_settings(broker) as api:
            await _apply_policies(api, report.policy_changes)
    connection = await connect(broker.urls, name="warren-setup")
    try:
        await declare_plan(connection, to_create(plan, report.objects))
        report.applied = True
        # A file endpoint moved off its lane: fenced (an ordered one drained) before setup returns.
        created = {c.name for c in report.objects if c.kind == "exchange" and c.status == "create"}
        await fence_file_moves(connection, config, created)
        if prune_leftovers and leftovers:
            report.leftovers = await prune(connection, leftovers, state.bindings, force)
    except aiormq.exceptions.AMQPChannelError as exc:
        # Declaration errors are mapped in declare_plan; this one came from pruning, after the plan was applied.
        raise TopologyError(f"the plan is applied, but pruning a leftover failed: {exc}; run setup again") from exc
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(
            f"lost the connection to RabbitMQ at {nodes_text(broker.urls)} during setup: {exc}"
        ) from exc
    finally:
        await connection.close()
    return report


def counts(report: SetupReport) -> Mapping[Kind, tuple[int, int, int]]:
    """Per kind: (to create or created, already present (migrated by policy included), differing)."""
    kinds: tuple[Kind, ...] = ("exchange", "queue", "binding")
    return {
        k: (report.count(k, "create"), report.count(k, "same") + report.count(k, "migrate"), report.count(k, "differs"))
        for k in kinds
    }
