"""``warren setup``: declare the planned topology on RabbitMQ, or say exactly why it cannot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from warren.common import EXIT_USAGE, ConfigOption, command_line, console, fail, load, run

if TYPE_CHECKING:  # the applier (aio-pika, the management API's aiohttp) loads to set up, not for --help
    from warren.broker.applier import SetupFailed, SetupReport
    from warren.broker.migration import PolicyCheck
    from warren.broker.prune import LeftoverOutcome
    from warren.store.repository import Reconciled
    from warren.topology.config import WarrenConfig

__all__ = ["register", "render_reconciled", "render_report"]

# Objects to create are listed one per line up to this many; a larger plan gets its count (the table has each kind's).
LIST_LIMIT = 200
_PLURAL = {"exchange": "exchanges", "queue": "queues", "binding": "bindings"}
_ACTION_STYLE = {
    "deleted": "red",
    "would delete": "red",
    "kept": "yellow",
    "would keep": "yellow",
    "reported": "yellow",
    "gone": "dim",
}


def _summary_table(report: SetupReport) -> Table:
    from warren.broker.applier import counts

    created = "would create" if report.dry_run or not report.ok else "created"
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("")
    table.add_column(created, justify="right", style="green")
    table.add_column("already present", justify="right")
    table.add_column("differs", justify="right", style="red")
    for kind, (new, same, differs) in counts(report).items():
        table.add_row(_PLURAL[kind], str(new), str(same), str(differs))
    return table


def _say(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True)


def _leftover_line(outcome: LeftoverOutcome) -> str:
    leftover = outcome.leftover
    style = _ACTION_STYLE.get(outcome.action, "")
    action = "not in the plan" if outcome.action == "reported" else outcome.action
    why = leftover.reason
    if outcome.action == "reported" and outcome.messages is not None:
        why += f", {outcome.messages} messages"
    if outcome.detail:
        why += f" ({outcome.detail})"
    return f"  [{style}]{action}[/] {leftover.kind} [bold]{escape(leftover.name)}[/]: {escape(why)}"


def _policy_line(check: PolicyCheck, dry_run: bool) -> str:
    verbs = {"create": "put", "update": "updated", "delete": "deleted"}
    verb = ("would be " if dry_run else "") + verbs[check.status]
    if check.policy is None:
        return f"  [yellow]{verb}[/] policy [bold]{escape(check.name)}[/] (no queue needs it any more)"
    given = ", ".join(f"{k}={v}" for k, v in check.policy.definition.items())
    count = len(check.policy.queues)
    return f"  [yellow]{verb}[/] policy [bold]{escape(check.name)}[/]: {escape(given)} on {count} queue(s)"


def _migration_lines(report: SetupReport) -> None:
    verb = "would migrate" if report.dry_run or not report.ok else "migrated"
    for check in report.migrating:
        missing = ", ".join(d.field for d in check.differences)
        _say(f"  [yellow]{verb}[/] queue [bold]{escape(check.name)}[/] by policy: it lacks {escape(missing)}")
    if report.migrating:
        _say(f"      [dim]{escape(report.migrating[0].hint)}[/]")
    for policy in report.policy_changes:
        _say(_policy_line(policy, report.dry_run or not report.ok))


def _hint(*words: str, config: Path | None) -> str:
    return f"`{escape(command_line(*words, config=config))}`"


def render_report(report: SetupReport, config: Path | None = None, options: tuple[str, ...] = ()) -> None:
    """The report as the CLI prints it: a count table, then what changes, leftovers and warnings. The commands it
    suggests name ``config``, the --config it was given; a dry run's says ``setup`` with its ``options`` but
    --dry-run."""
    mode = " · dry run, nothing changed" if report.dry_run else ""
    _say(f"[bold]warren setup[/] · vhost '{escape(report.vhost)}' · prefix '{report.prefix}'{mode}")
    console.print(_summary_table(report))
    verb = "would create" if report.dry_run or not report.ok else "created"
    listed = len(report.to_create) <= LIST_LIMIT
    lines = []  # printed at once: one print per line takes seconds for the thousands of objects of a large plan
    for check in report.objects:
        if check.status == "create" and listed:
            lines.append(f"  [green]{verb}[/] {check.kind} {escape(check.name)}")
        elif check.status == "differs":
            lines.append(f"  [red]differs[/] {check.kind} [bold]{escape(check.name)}[/]")
            lines += [f"      {escape(difference.describe())}" for difference in check.differences]
    if not listed:
        hint = f"[dim]{_hint('topology', 'show', '--live', config=config)} lists each[/]"
        lines.insert(0, f"  [green]{verb}[/] {len(report.to_create)} objects ({hint})")
    if lines:
        _say("\n".join(lines))
    _migration_lines(report)
    if report.leftovers:
        _say("[bold]Leftovers[/] (in Warren's namespaces, not in the plan):")
        for outcome in report.leftovers:
            _say(_leftover_line(outcome))
        if not report.prune:
            prune = _hint("setup", "--prune", config=config)
            _say(f"  [dim]{prune} deletes them (queues only when empty; add --force for the rest)[/]")
    for warning in report.warnings:
        _say(f"[yellow]warning:[/] {escape(warning)}")
    if not report.ok:
        return
    if report.no_change:
        _say(f"[bold green]No change[/]: all {len(report.objects)} planned objects already match the plan.")
    elif report.dry_run:
        doomed = sum(1 for x in report.leftovers if x.action == "would delete")
        also = f" and {doomed} leftovers deleted" if doomed else ""
        also += f" and {len(report.migrating)} queues migrated by policy" if report.migrating else ""
        again = _hint("setup", *options, config=config)
        _say(f"Dry run: {len(report.to_create)} objects would be created{also}; {again} applies it.")
    else:
        present = len(report.objects) - len(report.to_create) - len(report.migrating)
        deleted = f", {len(report.deleted)} leftovers deleted" if report.deleted else ""
        deleted += f", {len(report.migrating)} queues migrated by policy" if report.migrating else ""
        _say(f"[bold green]Done[/]: {len(report.to_create)} objects created, {present} already present{deleted}.")


async def _setup(
    settings: WarrenConfig, dry_run: bool, prune: bool, force: bool, check_capacity: bool
) -> SetupReport | SetupFailed:
    from warren.broker.applier import SetupFailed, apply_setup

    try:
        return await apply_setup(
            settings, dry_run=dry_run, prune_leftovers=prune, force=force, check_capacity=check_capacity
        )
    except SetupFailed as exc:
        return exc


async def _reconcile(settings: WarrenConfig) -> Reconciled:
    """The store (migrated) made to hold the file's endpoints as file-managed: read-only to the admin API."""
    from warren.store.repository import EndpointStore

    store = await EndpointStore.open(settings.store)
    try:
        return await store.reconcile_file(settings.endpoints)
    finally:
        await store.close()


def render_reconciled(outcome: Reconciled) -> None:
    changes = [f"{len(names)} {what}" for names, what in ((outcome.added, "added"), (outcome.updated, "updated"),
               (outcome.removed, "removed")) if names]  # fmt: skip
    _say(f"[bold]store[/]: the file's endpoints {'; '.join(changes) if changes else 'already stored'} (file-managed)")
    for name in outcome.taken:
        _say(
            f"[yellow]warning:[/] endpoint [bold]{escape(name)}[/] of the file has the name of an endpoint created "
            "through the API: not stored as file-managed (rename one of them)"
        )


def register(app: typer.Typer) -> None:
    @app.command("setup")
    def setup(
        config: ConfigOption = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Print what would be created or found different; change nothing.")
        ] = False,
        prune: Annotated[
            bool,
            typer.Option("--prune", help="Delete leftovers of removed endpoints and delay levels (empty queues only)."),
        ] = False,
        force: Annotated[
            bool, typer.Option("--force", help="With --prune: delete leftover queues even when they hold messages.")
        ] = False,
        skip_capacity_check: Annotated[
            bool,
            typer.Option(
                "--skip-capacity-check",
                help="Declare even when a RabbitMQ 3.10 node's open-files limit looks too low for the new quorum "
                "queues (past it the node accepts no connection).",
            ),
        ] = False,
    ) -> None:
        """Declare the topology on RabbitMQ: idempotent, all or nothing, and explicit about drift."""
        from warren.broker.applier import SetupFailed

        settings = load(config)
        if force and not prune:
            fail("--force only applies with --prune", EXIT_USAGE)
        outcome = run(_setup(settings, dry_run, prune, force, not skip_capacity_check))
        flags = {"--prune": prune, "--force": force, "--skip-capacity-check": skip_capacity_check}
        options = tuple(flag for flag, given in flags.items() if given)
        if isinstance(outcome, SetupFailed):
            render_report(outcome.report, config, options)
            fail(str(outcome))
        render_report(outcome, config, options)
        if settings.store.url is not None and not dry_run:
            render_reconciled(run(_reconcile(settings)))
