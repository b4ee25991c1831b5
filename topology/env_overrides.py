"""Environment overrides (``WARREN_SECTION__KEY``): which variables are overrides, and which are mistakes.

pydantic-settings reads the overrides, but a misspelt section (``WARREN_RETYR__CAP``) it ignores silently, a
misspelt key (``WARREN_RETRY__MAX_ATEMPTS``) comes back as an error about the *file*, and an indexed one
(``WARREN_ENDPOINTS__0__URL``) as "Input should be a valid tuple". These pure functions check every variable
first, against the models, so that each mistake is reported with the variable's name.

A variable is an override when its name, after ``WARREN_``, has a ``__`` (a key inside a section) or is a
top-level field (``WARREN_RETRY`` or ``WARREN_ENDPOINTS`` holding JSON). Other ``WARREN_*`` names
(``WARREN_CONFIG``, a secret read through ``env:WARREN_API_TOKEN``, the test and bench settings) are not
configuration and are left alone.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["ENV_PREFIX", "override_problems", "override_variables"]

ENV_PREFIX = "WARREN_"
DELIMITER = "__"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (also inside ``X | None``), or None for a plain value or a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for m in map(_model_of, get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def _is_sequence(annotation: Any) -> bool:
    return get_origin(annotation) in (tuple, list) or any(_is_sequence(a) for a in get_args(annotation))


def override_variables(environ: Mapping[str, str], model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The variables that are overrides, each with the path of fields it names (lower case)."""
    found: dict[str, tuple[str, ...]] = {}
    for name in environ:
        if not name.upper().startswith(ENV_PREFIX):
            continue
        path = tuple(name[len(ENV_PREFIX) :].lower().split(DELIMITER))
        if len(path) > 1 or path[0] in model.model_fields:
            found[name] = path
    return found


def _unknown(variable: str, what: str, word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1) or [c for c in sorted(choices) if word and c.startswith(word)]
    hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(sorted(choices))})"
    return f"{variable}: {what} has no key '{word}'{hint}"


def _problem(variable: str, path: tuple[str, ...], model: type[BaseModel]) -> str | None:
    current: type[BaseModel] = model
    where = "the configuration"
    for depth, word in enumerate(path):
        field = current.model_fields.get(word)
        if field is None or not word:
            return _unknown(variable, where, word, list(current.model_fields))
        rest = path[depth + 1 :]
        if not rest:
            return None
        label = ".".join(path[: depth + 1])
        if _is_sequence(field.annotation):
            whole = ENV_PREFIX + DELIMITER.join(path[: depth + 1]).upper()
            return (
                f"{variable}: single entries of {label} cannot be overridden; set {whole} "
                f'to the whole list as JSON (or, for a secret, write secret = "env:NAME" in the file)'
            )
        inner = _model_of(field.annotation)
        if inner is None:
            return f"{variable}: {label} is a value, not a section with keys"
        current, where = inner, f"[{label}]"
    return None


def override_problems(environ: Mapping[str, str], model: type[BaseModel]) -> list[str]:
    """One line per override that names no field, or names one inside a list (see the module docstring)."""
    variables = override_variables(environ, model)
    return [p for name, path in sorted(variables.items()) if (p := _problem(name, path, model)) is not None]
