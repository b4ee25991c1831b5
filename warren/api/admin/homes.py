"""An endpoint's home (``dedicated`` or ``lane``) as the admin operations choose and keep it. Pure.

An endpoint created at runtime (the admin API, ``warren endpoint create``) without a ``home`` gets the
deployment's default (``[lanes] api_default_home`` while lanes are on, ``dedicated`` when they are off:
``LaneSettings.default_home``), stored with it so that a later change of that setting moves nothing. An update
that leaves ``home`` out keeps the endpoint where it is: a move between homes happens only when asked for, and
the live apply decides whether it can (docs/architecture.md, "Shared lanes": what is refused, with 409).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from warren.topology.settings import LaneSettings

__all__ = ["home_after_update", "ordered_move", "with_home"]


def _ordering(data: Mapping[str, Any]) -> str:
    return str(data.get("ordering") or "none")


def with_home(data: Mapping[str, Any], lanes: LaneSettings) -> dict[str, Any]:
    """A create's fields with its home: the one it names, else the deployment's default for it."""
    return {"home": lanes.default_home(_ordering(data)), **data}


def home_after_update(current: str, changes: Mapping[str, Any], data: Mapping[str, Any], lanes: LaneSettings) -> str:
    """The home an update asks for: ``current`` unless ``changes`` names one (``null``: the default a create would
    get, ``data`` being the endpoint's fields after the update)."""
    if "home" not in changes:
        return current
    named = changes["home"]
    return str(named) if named is not None else lanes.default_home(_ordering(data))


def ordered_move(current_home: str, current_ordering: str, data: Mapping[str, Any]) -> str | None:
    """Why an update may not move an endpoint between homes (None: it may). An ordered endpoint moves either way,
    each key's order kept (onto the ordered lanes: warren/broker/live_demote_ordered.py; from them to partitions of
    its own: warren/broker/ordered_promotion.py), but not while its ordering changes too (docs/architecture.md,
    "Moving between homes")."""
    home, ordering = str(data.get("home") or current_home), _ordering(data)
    if home == current_home or "key" not in (current_ordering, ordering):
        return None
    name = data.get("name")
    if ordering != current_ordering:
        return (
            f"endpoint {name!r}: its home ({current_home} to {home}) and its ordering ({current_ordering} to "
            f"{ordering}) change at once; change one, then the other"
        )
    return None
