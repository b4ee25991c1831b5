"""Rooms small enough to read (issue 33): no module of warren over 400 lines, no class over 300."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "warren"
MODULE_LINES = 400
CLASS_LINES = 300


def test_no_module_over_400_lines_and_no_class_over_300() -> None:
    too_long: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE.parent)
        if (lines := text.count("\n")) > MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            size = (node.end_lineno or node.lineno) - node.lineno + 1 if isinstance(node, ast.ClassDef) else 0
            if size > CLASS_LINES:
                too_long.append(f"{name}: class {getattr(node, 'name', '?')}, {size} lines")
    assert not too_long, "split these (docs/architecture.md, the map of homes):\n" + "\n".join(too_long)
