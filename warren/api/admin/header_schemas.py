"""The admin API's view of an endpoint's ``headers`` and ``proxy`` (warren/topology/endpoint_headers.py, proxies.py).

The values are checked by the Endpoint model itself (a 422 naming the header); these describe the shape."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HEADERS_DOC", "PROXY_DOC", "PROXY_PATTERN", "SecretHeaderIn"]

HEADERS_DOC = (
    "Sent with every POST; an update replaces the whole table. A secret header is {value, secret: true}: every view "
    "shows its value as ***. Refused: hop-by-hop headers, host, content-length, proxy-*, content-type, webhook-*; "
    "names that are not HTTP tokens; control characters (CR, LF, NUL) in values; more than 32, or 8 KiB in all."
)
PROXY_DOC = (
    "The name of one of the deployment's egress proxies ([delivery.proxies]), or 'direct' for none. Left out: "
    "[delivery] proxy, when one is set. Admin tokens only: 403 for a tenant's key."
)
PROXY_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class SecretHeaderIn(BaseModel):
    """A header value kept secret: sealed at rest with the store's keys, shown as ***."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    value: str = Field(max_length=8192)
    secret: bool = True
