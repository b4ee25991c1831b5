"""docs/configuration.md stays the complete reference: every key of every section is documented."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from warren.topology.config import WarrenConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _model(annotation: object) -> type[BaseModel] | None:
    """The model of a section: ``BrokerSettings`` or the ``Endpoint`` inside ``tuple[Endpoint, ...]``."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _documented_keys(text: str) -> set[str]:
    """``section.key`` for every table row: bare keys under a ``## `[section]``` heading, or written in full."""
    keys: set[str] = set()
    section = ""
    for line in text.splitlines():
        heading = re.match(r"^## `\[{1,2}([a-z_]+)\]{1,2}`", line)
        if heading:
            section = heading.group(1)
        elif line.startswith("## "):
            section = ""
        row = re.match(r"^\| `([a-z_.]+)` \|", line)
        if row:
            key = row.group(1)
            keys.add(key if "." in key else f"{section}.{key}")
    return keys


def test_every_configuration_key_has_a_row_in_the_reference() -> None:
    # Given the keys the reference documents
    documented = _documented_keys(DOC.read_text(encoding="utf-8"))
    # When every key of every section is listed from the models
    expected = set()
    for section, field in WarrenConfig.model_fields.items():
        model = _model(field.annotation)
        assert model is not None, section
        expected |= {f"{section}.{key}" for key in model.model_fields}
    # Then none is missing (and the check itself found the tables)
    assert "broker.url" in documented and "endpoints.secret" in documented
    assert not expected - documented, f"add these keys to {DOC.name}: {sorted(expected - documented)}"
