"""A key the configuration does not have, in the file or in a ``WARREN_*`` variable: one suggestion for both.

The environment form (``env_overrides``) and the file form (``config``, from pydantic's ``extra_forbidden``)
each find the section a misspelt key stands in; this module says which key was probably meant.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["key_hint", "model_of", "section_keys"]


def key_hint(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean KEY?)`` for the closest of ``choices`` (or one that ``word`` begins), else every choice."""
    known = sorted(choices)
    close = difflib.get_close_matches(word, known, n=1) or [c for c in known if word and c.startswith(word)]
    return f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"


def model_of(annotation: Any, *, entries: bool = False) -> type[BaseModel] | None:
    """The model a field holds (also inside ``X | None``), or None for a plain value. With ``entries``, the model
    of a list's entries too (``tuple[Endpoint, ...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    inner = get_args(annotation) if entries or get_origin(annotation) in (Union, types.UnionType) else ()
    models = {m for m in (model_of(a, entries=entries) for a in inner if a is not Ellipsis) if m is not None}
    return models.pop() if len(models) == 1 else None


def section_keys(model: type[BaseModel], location: Sequence[int | str]) -> list[str] | None:
    """The keys allowed where the last part of ``location`` (pydantic's ``loc``: a list entry is an int) stands,
    or None when the path leads somewhere that is not a section of ``model``."""
    current = model
    for part in location[:-1]:
        if isinstance(part, int):
            continue  # an entry of the list the previous key named: its model is already current
        field = current.model_fields.get(part)
        inner = model_of(field.annotation, entries=True) if field is not None else None
        if inner is None:
            return None
        current = inner
    return list(current.model_fields)
