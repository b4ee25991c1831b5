"""`warren attempts`: the attempt log read from each store, as a table and as JSON, in a child process."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tests.support.attempts import attempt, delivered
from tests.support.cli import hinted, run_hinted, warren
from tests.support.processes import write_config
from tests.support.store import store_postgres, store_url
from warren import common
from warren.cli import app
from warren.store.attempts import AttemptLog
from warren.topology.config import StoreSettings, WarrenConfig

__all__ = ["store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)


async def cli(*args: str) -> Result:
    """The command in-process (in a thread: it runs its own event loop); the machine's CPU is shared, and one
    child process (below) shows the real command works."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


async def test_an_events_attempts_and_an_endpoints_failures_from_the_command_line(
    store_url: str, tmp_path: Path
) -> None:
    # Given an event retried once at billing then delivered, delivered at once to audit, and an old failure
    now = time.time()
    first = attempt(event_id="evt_cli", endpoint="billing", at=now - 30, error="HTTP 503: busy")
    audit = delivered(event_id="evt_cli", endpoint="audit", at=now - 29)
    second = delivered(event_id="evt_cli", endpoint="billing", attempt=2, at=now - 20)
    old = attempt(event_id="evt_old", endpoint="billing", at=now - 7200, outcome="dead", status=422, next_delay_s=None)
    log = await AttemptLog.open(StoreSettings(url=store_url))
    try:
        await log.add_many([second, old, audit, first])
    finally:
        await log.close()
    path = write_config(tmp_path, WarrenConfig(store={"url": store_url}))
    c = ("--config", str(path))
    # When the event's attempts are asked for, as JSON (in a child process, as a user runs it) and as text
    as_json = await warren("attempts", "evt_cli", *c, "--json")
    as_text = await cli("attempts", "evt_cli", *c)
    # Then they come in time order with what each did
    assert as_json.code == 0, as_json.err
    data = json.loads(as_json.out)
    assert [(a["endpoint"], a["attempt"], a["outcome"]) for a in data["attempts"]] == [
        ("billing", 1, "retry"),
        ("audit", 1, "delivered"),
        ("billing", 2, "delivered"),
    ]
    assert data["attempts"][0]["error"] == "HTTP 503: busy" and data["attempts"][0]["failed"] is True
    assert as_text.exit_code == 0, as_text.output
    rows = [[cell.strip() for cell in line.split("│")] for line in as_text.output.splitlines() if "│" in line]
    assert [row[1] for row in rows] == ["billing", "audit", "billing"], as_text.output
    assert rows[0][3] == "retry" and rows[0][-1] == "HTTP 503: busy"
    # And the endpoint's failures, newest first, then only the last hour's
    failures = await cli("attempts", "--endpoint", "billing", "--failed", *c, "--json")
    recent = await cli("attempts", "--endpoint", "billing", "--failed", "--since", "1h", *c, "--json")
    assert [a["event_id"] for a in json.loads(failures.output)["attempts"]] == ["evt_cli", "evt_old"]
    assert [a["event_id"] for a in json.loads(recent.output)["attempts"]] == ["evt_cli"]
    # And an unknown event says so; a wrong use is a usage error
    unknown = await cli("attempts", "evt_none", *c)
    both = await cli("attempts", "evt_cli", "--endpoint", "billing", *c)
    assert unknown.exit_code == 0 and "no attempt of evt_none" in unknown.output
    assert both.exit_code == 2 and "one of the two" in both.output


async def test_an_answer_is_shown_escaped_and_cut_in_the_table_and_whole_in_json(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an attempt whose endpoint answered 400 with a long body holding a terminal escape and a newline
    answer = "\x1b[2J\x1b[31mfake\nrow│ " + "x" * 100
    rejected = attempt(
        event_id="evt_answer",
        status=400,
        outcome="dead",
        error=None,
        next_delay_s=None,
        response=answer,
        response_headers={"content-type": "text/plain"},
    )
    log = await AttemptLog.open(StoreSettings(url=store_url))
    try:
        await log.add_many([rejected])
    finally:
        await log.close()
    path = str(write_config(tmp_path, WarrenConfig(store={"url": store_url})))
    # When it is listed as a table (on a terminal wide enough for all of it) and as JSON
    monkeypatch.setattr(common.console, "width", 400)
    table = await cli("attempts", "evt_answer", "--config", path)
    as_json = await cli("attempts", "evt_answer", "--config", path, "--json")
    # Then the table shows the answer's start on one line, its controls as escapes, never sent to the terminal
    assert table.exit_code == 0, table.output
    assert "\x1b" not in table.output and "\\x1b[2J\\x1b[31" in table.output  # rich may wrap the rest
    assert table.output.count("x") < 70 and "…" in table.output  # 60 characters of it, of which 2 in \x1b
    # And the JSON has it whole, with its headers
    (shown,) = json.loads(as_json.output)["attempts"]
    assert shown["response"] == answer and shown["response_headers"] == {"content-type": "text/plain"}


async def test_without_a_store_the_command_says_where_the_log_lives(tmp_path: Path) -> None:
    path = write_config(tmp_path, WarrenConfig())
    result = await cli("attempts", "evt_1", "--config", str(path))
    assert result.exit_code == 2 and "[store] url" in result.output


def event_column(out: str) -> list[str]:
    """The event ids of the text view's rows, in order."""
    return [line.split("│")[1].strip() for line in out.splitlines() if "│" in line]


async def test_the_next_page_hint_runs_as_printed_and_pages_exactly(store_url: str, tmp_path: Path) -> None:
    # Given five failed attempts at billing, three of them at the same moment (a batch a worker recorded at once),
    # one delivered attempt (left out by --failed) and another endpoint's
    now = round(time.time(), 6)
    same = [attempt(event_id=f"evt_same_{i}", at=now - 10) for i in range(3)]
    older = [attempt(event_id="evt_older_1", at=now - 20), attempt(event_id="evt_older_2", at=now - 30)]
    ok = delivered(event_id="evt_ok", at=now - 15)
    elsewhere = attempt(event_id="evt_audit", endpoint="audit", at=now - 10)
    log = await AttemptLog.open(StoreSettings(url=store_url))
    try:
        await log.add_many([*same, *older, ok, elsewhere])
    finally:
        await log.close()
    path = write_config(tmp_path, WarrenConfig(store={"url": store_url}))
    newest_first = [e.event_id for e in sorted([*same, *older], key=lambda e: (e.at, e.id), reverse=True)]
    # When the operator lists two at a time and runs each page's hint as it is printed
    run = await warren("attempts", "--endpoint", "billing", "--failed", "--since", "1h", "--limit", "2", "--config",
                       str(path))  # fmt: skip
    pages = [run]
    while "the next page: " in run.out:
        command = hinted(run.out, "the next page: ")
        assert command[command.index("--config") + 1] == str(path) and "--failed" in command
        run = await run_hinted(command)
        pages.append(run)
    # Then every page worked, and together they hold each failed attempt once, newest first: the three at the
    # same moment are split between two pages, none skipped, none repeated
    assert all(page.code == 0 for page in pages), [page.err for page in pages]
    assert [len(event_column(page.out)) for page in pages] == [2, 2, 1]
    assert [event for page in pages for event in event_column(page.out)] == newest_first
    # And the hint gave --since as the moment it meant, not "1h" again (which would have moved meanwhile)
    assert "1h" not in hinted(pages[0].out, "the next page: ")


async def test_a_cursor_that_is_not_one_is_a_usage_error(store_url: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, WarrenConfig(store={"url": store_url}))
    result = await cli("attempts", "--endpoint", "billing", "--cursor", "nonsense", "--config", str(path))
    assert result.exit_code == 2 and "--cursor: not a cursor of this list" in result.output
    with_event = await cli("attempts", "evt_1", "--cursor", "x", "--config", str(path))
    assert with_event.exit_code == 2 and "go with --endpoint" in with_event.output
