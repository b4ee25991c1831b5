"""An endpoint's home (``dedicated`` or ``lane``) as the admin operations choose and keep it. Pure.

An endpoint created at runtime (the admin API, ``warren endpoint create``) without a ``home`` gets the
deployment's default (``[lanes] api_default_home`` while lanes are on, ``dedicated`` when they are off:
``LaneSettings.default_home``). An update never moves an endpoint between homes: moving while messages may be
on their way to either home is not built (docs/architecture.md, "Shared lanes"), so an update that leaves
``home`` out keeps it, and one that names another home is refused before anything is applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from warren.api.ingest.errors import ApiError
from warren.topology.settings import LaneSettings

__all__ = ["REFUSED", "home_kept", "with_home"]

# The change was refused: by RabbitMQ (holds messages, ordering change, a state change that does not apply), or
# because it would move the endpoint between homes.
REFUSED = "refused"


def _ordering(data: Mapping[str, Any]) -> str:
    return str(data.get("ordering") or "none")


def with_home(data: Mapping[str, Any], lanes: LaneSettings) -> dict[str, Any]:
    """A create's fields with its home: the one it names, else the deployment's default for it."""
    return {"home": lanes.default_home(_ordering(data)), **data}


def home_kept(name: str, current: str, changes: Mapping[str, Any], data: Mapping[str, Any], lanes: LaneSettings) -> str:
    """The home an update leaves endpoint ``name`` in: ``current``, whatever ``changes`` says.

    ``changes`` leaving ``home`` out keeps it; naming it (``null``: the default a create would get, ``data`` being
    the endpoint's fields after the update) is refused with 409 when that is another home.
    """
    if "home" not in changes:
        return current
    wanted = changes["home"] if changes["home"] is not None else lanes.default_home(_ordering(data))
    if wanted != current:
        raise ApiError(
            409,
            REFUSED,
            f"endpoint {name!r} lives on {'a lane' if current == 'lane' else 'queues of its own'} (home "
            f"{current!r}): moving it to home {wanted!r} is not built yet; delete it and create it again there",
        )
    return current
