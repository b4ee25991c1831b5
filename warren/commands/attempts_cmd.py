"""``warren attempts EVENT_ID`` and ``warren attempts --endpoint NAME``: the attempt log, read from the store.

Every delivery attempt workers made, as ``warren api``'s writer stored it (docs/endpoints.md, "The attempt
log"): all of one event's attempts in time order, or one endpoint's newest first. Needs ``[store] url``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from warren.common import EXIT_USAGE, ConfigOption, command_line, console, fail, load, run
from warren.core.moments import iso_utc
from warren.core.visible import visible

if TYPE_CHECKING:  # the store's libraries and the configuration load when the command runs, not for --help
    from warren.store.attempt_records import AttemptEntry
    from warren.store.attempts import AttemptPage
    from warren.topology.config import StoreSettings

__all__ = ["register"]

TimeHelp = "ISO time (2026-05-01T12:00Z) or ago (15m, 2h, 1d), as for `warren dlq`."
RESPONSE_SHOWN = 60  # characters of an answer's start in the table (--json prints it whole)


def _moment(text: str | None, option: str) -> float | None:
    """A --since/--until value as epoch seconds."""
    if text is None:
        return None
    from warren.broker.dlq.selection import parse_moment

    try:
        return parse_moment(text, dt.datetime.now(dt.UTC)) / 1000
    except ValueError as exc:
        fail(f"{option}: {exc}", EXIT_USAGE)


def _iso(ts: float) -> str:
    return iso_utc(ts) or "-"


def _read_event(settings: StoreSettings, event_id: str) -> list[AttemptEntry]:
    from warren.store.attempts import AttemptLog

    async def read() -> list[AttemptEntry]:
        log = await AttemptLog.open(settings)
        try:
            return await log.for_event(event_id)
        finally:
            await log.close()

    return run(read())


def _read_endpoint(
    settings: StoreSettings,
    endpoint: str,
    *,
    failed: bool,
    since: float | None,
    until: float | None,
    limit: int,
    cursor: str | None,
) -> AttemptPage:
    from warren.store.attempts import AttemptLog, decode_cursor

    if cursor is not None:
        try:
            decode_cursor(cursor)
        except ValueError as exc:
            fail(f"--cursor: {exc}", EXIT_USAGE)

    async def read() -> AttemptPage:
        log = await AttemptLog.open(settings)
        try:
            return await log.for_endpoint(
                endpoint, failed_only=failed, since=since, until=until, limit=limit, cursor=cursor
            )
        finally:
            await log.close()

    return run(read())


Bounds = tuple[float | None, float | None]  # --since and --until as epoch seconds


def _next_page(endpoint: str, failed: bool, bounds: Bounds, limit: int, cursor: str) -> list[str]:
    """The arguments that print the next page: the same selection, its bounds as absolute times (``--since 1h``
    would have moved by then), after the cursor (the last attempt's time and id: one at the same moment as it
    is neither skipped nor shown again)."""
    words = ["attempts", "--endpoint", endpoint, *(["--failed"] if failed else [])]
    for option, moment in zip(("--since", "--until"), bounds, strict=True):
        words += [option, _iso(moment)] if moment is not None else []
    return [*words, "--limit", str(limit), "--cursor", cursor]


def _json(entries: list[AttemptEntry]) -> list[dict[str, object]]:
    return [{**asdict(e), "at": _iso(e.at), "failed": e.failed} for e in entries]


def _shown(text: str | None, limit: int | None = None) -> str:
    """An endpoint's words, made safe for the terminal (its controls as escapes) and rich markup, on one line."""
    if not text:
        return ""
    text = visible(text)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return escape(text)


def _table(entries: list[AttemptEntry], *, first: str) -> None:
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False)
    for column in ("at", first, "#", "outcome", "status", "ms", "next", "error or answer"):
        table.add_column(column, justify="right" if column in ("#", "status", "ms") else "left")
    for e in entries:
        style = "green" if not e.failed else "yellow" if e.outcome.startswith("retry") else "red"
        table.add_row(
            _iso(e.at),
            escape(e.endpoint if first == "endpoint" else e.event_id),
            str(e.attempt),
            f"[{style}]{e.outcome}[/]",
            "" if e.status is None else str(e.status),
            f"{e.duration_ms:.0f}",
            "" if e.next_delay_s is None else f"{e.next_delay_s:g}s",
            _shown(e.error) if e.error else _shown(e.response, RESPONSE_SHOWN),
        )
    console.print(table)


def attempts(
    event_id: Annotated[str | None, typer.Argument(help="The event's id: every attempt of it, in order.")] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", "-e", help="An endpoint's attempts instead, newest first.")
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="With --endpoint: only attempts that failed.")] = False,
    since: Annotated[str | None, typer.Option("--since", help=f"With --endpoint: at or after. {TimeHelp}")] = None,
    until: Annotated[str | None, typer.Option("--until", help=f"With --endpoint: before. {TimeHelp}")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=10_000, help="With --endpoint: at most.")] = 50,
    cursor: Annotated[
        str | None,
        typer.Option("--cursor", help="With --endpoint: the page after the one that printed it (as next_cursor)."),
    ] = None,
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """The attempt log: every delivery attempt of an event, or an endpoint's latest (kept store.attempt_retention)."""
    if (event_id is None) == (endpoint is None):
        fail("give an EVENT_ID or --endpoint NAME (one of the two)", EXIT_USAGE)
    if event_id is not None and (failed or since or until or cursor):
        fail("--failed, --since, --until and --cursor go with --endpoint", EXIT_USAGE)
    settings = load(config)
    if settings.store.url is None:
        fail("no store configured: set [store] url (docs/endpoints.md); the attempt log lives there", EXIT_USAGE)
    if event_id is not None:
        entries = _read_event(settings.store, event_id)
        if as_json:
            typer.echo(json.dumps({"event_id": event_id, "attempts": _json(entries)}, indent=2))
            return
        if not entries:
            console.print(f"no attempt of {escape(event_id)} in the attempt log", highlight=False)
            return
        _table(entries, first="endpoint")
        return
    assert endpoint is not None
    low, high = _moment(since, "--since"), _moment(until, "--until")
    page = _read_endpoint(settings.store, endpoint, failed=failed, since=low, until=high, limit=limit, cursor=cursor)
    if as_json:
        data = {
            "endpoint": endpoint,
            "attempts": _json(page.entries),
            "more": page.next_cursor is not None,
            "next_cursor": page.next_cursor,  # the next page: --cursor
        }
        typer.echo(json.dumps(data, indent=2))
        return
    if not page.entries:
        console.print(f"no attempt at {escape(endpoint)} in the attempt log for that selection", highlight=False)
        return
    _table(page.entries, first="event")
    if page.next_cursor:
        following = command_line(*_next_page(endpoint, failed, (low, high), limit, page.next_cursor), config=config)
        shown = "the next" if cursor else "the newest"
        console.print(f"[dim]{shown} {limit} shown; the next page: {escape(following)}[/]", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("attempts")(attempts)
