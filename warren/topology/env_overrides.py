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

from collections.abc import Mapping
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from warren.topology.unknown_keys import key_hint, model_of

__all__ = ["ENV_PREFIX", "override_problems", "override_variables"]

ENV_PREFIX = "WARREN_"
DELIMITER = "__"


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
    return f"{variable}: {what} has no key '{word}'{key_hint(word, choices)}"


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
        inner = model_of(field.annotation)
        if inner is None:
            return f"{variable}: {label} is a value, not a section with keys"
        current, where = inner, f"[{label}]"
    return None


def override_problems(environ: Mapping[str, str], model: type[BaseModel]) -> list[str]:
    """One line per override that names no field, or names one inside a list (see the module docstring)."""
    variables = override_variables(environ, model)
    return [p for name, path in sorted(variables.items()) if (p := _problem(name, path, model)) is not None]
