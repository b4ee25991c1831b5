"""How ``warren dlq`` shows dead letters: a table per queue, one message whole, a history table."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from warren.broker.dlq.letters import DeadLetter, format_ms, json_safe
from warren.core.visible import visible

__all__ = ["WIDE", "letter_detail", "letters_table", "moves_table", "type_counts"]

ERROR_WIDTH = 60
WIDE = 150  # terminal columns from which each field has a column of its own; below, two lines per letter


def _when(ms: int | None) -> str:
    text = format_ms(ms)
    return text.replace("T", " ")[:-5] + "Z" if text else "-"


def _cell(value: object) -> str:
    """A value as printed: control characters from the message written as escapes (warren/core/visible.py)."""
    return "-" if value is None else visible(str(value))


def _error(letter: DeadLetter) -> str:
    error = visible(letter.last_error or letter.dead_reason or "")
    return error if len(error) <= ERROR_WIDTH else error[: ERROR_WIDTH - 1] + "…"


def _narrow(letters: Sequence[DeadLetter], title: str, with_error: bool) -> RenderableType:
    """Below WIDE columns: the id whole, type and death on its line; the rest indented beneath, wrapped."""
    lines: list[RenderableType] = [Text(title, "italic")]
    for letter in letters:
        lines.append(Text(f"{_cell(letter.event_id)}  {_cell(letter.event_type)}  dead {_when(letter.dead_ms)}"))
        details = [f"{_cell(letter.attempts)} attempt(s)", f"key {_cell(letter.key)}"]
        if with_error:
            first, status = _when(letter.first_attempt_ms), _cell(letter.last_status)
            details += [f"first {first}", f"status {status}", _error(letter)]
        lines.append(Text("  " + " · ".join(details), "dim"))
    return Group(*lines)


def letters_table(letters: Sequence[DeadLetter], title: str, width: int = WIDE) -> RenderableType:
    """The ``dlq list`` table: event id, type, key, attempts, first attempt, dead at, last status, last error.

    On a terminal narrower than WIDE, two lines per letter (``_narrow``), so that no id is cut.
    """
    if width < WIDE:
        return _narrow(letters, title, with_error=True)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("event id", "type", "key", "attempts", "first attempt", "dead at", "status", "last error"):
        table.add_column(column, no_wrap=column != "last error", overflow="fold")
    for letter in letters:
        table.add_row(
            escape(_cell(letter.event_id)),
            escape(_cell(letter.event_type)),
            escape(_cell(letter.key)),
            _cell(letter.attempts),
            _when(letter.first_attempt_ms),
            _when(letter.dead_ms),
            _cell(letter.last_status),
            escape(_error(letter)),
        )
    return table


def moves_table(letters: Sequence[DeadLetter], title: str, width: int = WIDE) -> RenderableType:
    """What a dry run would replay: enough to recognise each message."""
    if width < WIDE:
        return _narrow(letters, title, with_error=False)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("event id", "type", "key", "attempts", "dead at"):
        table.add_column(column, no_wrap=True)
    for letter in letters:
        table.add_row(
            escape(_cell(letter.event_id)),
            escape(_cell(letter.event_type)),
            escape(_cell(letter.key)),
            _cell(letter.attempts),
            _when(letter.dead_ms),
        )
    return table


def type_counts(letters: Sequence[DeadLetter]) -> str:
    counts = Counter(_cell(letter.event_type) for letter in letters)
    return ", ".join(f"{kind} {count}" for kind, count in counts.most_common())


def letter_detail(letter: DeadLetter, copy: int, copies: int) -> RenderableType:
    """``dlq show``: the facts, the reason, the attempt history, every header, and the envelope."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    rows = [
        ("event id", _cell(letter.event_id)),
        ("type", _cell(letter.event_type)),
        ("key", _cell(letter.key)),
        ("endpoint", _cell(letter.endpoint)),
        ("attempts", _cell(letter.attempts)),
        ("first attempt", _when(letter.first_attempt_ms)),
        ("last attempt", _when(letter.last_attempt_ms)),
        ("dead at", _when(letter.dead_ms)),
        ("last status", _cell(letter.last_status)),
        ("last error", _cell(letter.last_error)),
        ("last response", _cell(letter.last_response)),
        ("dead reason", _cell(letter.dead_reason)),
        ("queue position", f"{letter.position} (0 = head, the oldest)"),
    ]
    for name, value in rows:
        facts.add_row(name, Text(value))
    history = Table(title="attempt history (last attempts, oldest first)", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("#", "at", "status", "duration", "error"):
        history.add_column(column, overflow="fold")
    first_number = (letter.attempts or len(letter.history)) - len(letter.history) + 1
    for offset, item in enumerate(letter.history):
        at = item.get("at")
        history.add_row(
            str(first_number + offset),
            _when(at if isinstance(at, int) else None),
            _cell(item.get("status")),
            f"{item['ms']} ms" if isinstance(item.get("ms"), int) else "-",
            Text(_cell(item.get("error"))),
        )
    headers = Table(title="headers", title_justify="left", box=box.SIMPLE_HEAD)
    headers.add_column("name", no_wrap=True)
    headers.add_column("value", overflow="fold")
    for name, value in sorted(letter.headers.items()):
        safe = json_safe(value)
        headers.add_row(escape(_cell(name)), Text(_cell(safe) if isinstance(safe, str) else json.dumps(safe)))
    envelope = letter.whole()["envelope"]
    copy_note = f" (copy {copy} of {copies})" if copies > 1 else ""
    title = Text(f"dead letter {_cell(letter.event_id)}{copy_note}", "bold")
    return Group(
        title,
        facts,
        history,
        headers,
        Text("envelope", "bold"),
        Syntax(json.dumps(envelope, indent=2, ensure_ascii=False), "json", word_wrap=True),
    )
