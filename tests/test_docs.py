"""The documentation stands alone: no link or path leads outside the repository, and commands are copyable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "CHANGELOG.md", *ROOT.glob("examples/*")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_leaves_the_repository(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    assert "../shared" not in text and "/work/shared" not in text
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        resolved = (document.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{target} leads outside the repository"
        assert resolved.exists(), f"{target} does not exist"


def test_import_definitions_is_shown_with_an_absolute_path() -> None:
    # rabbitmqctl resolves the file on the node, from the node's working directory
    for document in DOCUMENTS:
        for command in re.findall(r"rabbitmqctl import_definitions ([^`\s]+)", document.read_text(encoding="utf-8")):
            assert command.startswith(("/", '"$PWD/', "$PWD/")), f"{document.name}: {command}"
