"""Reading the documentation as the tests check it: a section under its heading, and the fenced blocks in it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


class Block(NamedTuple):
    info: str  # what follows the opening fence: "python", "toml", "" for a shell block without one
    text: str


def _headings(document: Path) -> list[tuple[int, str, int]]:
    """(level, title, line number) of each heading; a ``#`` line inside a fenced block is not one."""
    found = []
    fenced = False
    for number, line in enumerate(document.read_text(encoding="utf-8").splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        title = None if fenced else re.match(r"^(#+) (.*?)\s*$", line)
        if title:
            found.append((len(title.group(1)), title.group(2), number))
    return found


def sections(document: Path) -> dict[str, str]:
    """Each heading's title and the text under it, up to the next heading of any level."""
    lines = document.read_text(encoding="utf-8").splitlines(keepends=True)
    headings = _headings(document)
    ends = [number for _, _, number in headings[1:]] + [len(lines)]
    return {title: "".join(lines[number + 1 : end]) for (_, title, number), end in zip(headings, ends, strict=True)}


def section(document: Path, heading: str) -> str:
    """The text under the heading whose title is ``heading`` (any level), up to the next heading of that level or
    higher; AssertionError when there is no such heading, so that a renamed section fails its test instead of
    passing on nothing."""
    lines = document.read_text(encoding="utf-8").splitlines(keepends=True)
    headings = _headings(document)
    for index, (level, title, number) in enumerate(headings):
        if title == heading:
            end = next((n for lvl, _, n in headings[index + 1 :] if lvl <= level), len(lines))
            return "".join(lines[number + 1 : end])
    raise AssertionError(f"{document.name} has no heading {heading!r}")


def blocks(text: str, info: str | None = None) -> list[Block]:
    """The fenced blocks of ``text`` in order; only those whose info string is ``info`` when it is given."""
    found = [Block(match.group(1).strip(), match.group(2)) for match in _FENCE.finditer(text)]
    return [block for block in found if info is None or block.info == info]


def only_block(document: Path, heading: str, info: str) -> str:
    """The one ``info`` block of a section (AssertionError when there is none or several)."""
    found = blocks(section(document, heading), info)
    assert len(found) == 1, f"{document.name}, {heading!r}: {len(found)} {info or 'plain'} blocks, expected 1"
    return found[0].text


def block_after(document: Path, marker: str, info: str) -> str:
    """The first ``info`` block after the text ``marker`` (a paragraph that introduces it, not a heading)."""
    text = document.read_text(encoding="utf-8")
    start = text.find(marker)
    assert start >= 0, f"{document.name} no longer says {marker!r}"
    found = blocks(text[start:], info)
    assert found, f"{document.name}: no {info} block after {marker!r}"
    return found[0].text
