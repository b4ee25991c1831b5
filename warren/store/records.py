"""What the store holds, as plain values, and how a stored endpoint becomes topology's Endpoint. Pure.

The store keeps an endpoint's name, tenant, url and event patterns in columns and every other field of
``Endpoint`` (ordering, partitions, limits, retry, circuit...) in ``options``, so a field added to Endpoint is
stored without a migration.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from warren.topology.config import Endpoint
from warren.topology.endpoint_headers import hidden_json, opened_json, sealed_json
from warren.topology.secrets import SigningSecrets
from warren.topology.signing_keys import ED25519, HMAC, Scheme, signing_secret

__all__ = [
    "API",
    "FILE",
    "RevealedSecret",
    "StoredEndpoint",
    "StoredSecret",
    "endpoint_options",
    "new_signing_secret",
    "to_endpoint",
]

API: Literal["api"] = "api"  # created through the admin API or `warren endpoint create`
FILE: Literal["file"] = "file"  # reconciled from the configuration file by `warren setup`: read-only here

# Columns of their own; every other Endpoint field goes to ``options``.
_COLUMNS = frozenset({"name", "url", "events", "secret", "tenant"})


def new_signing_secret() -> str:
    """A fresh Standard Webhooks secret: ``whsec_`` and 24 random bytes in base64 (as Svix makes them)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


@dataclass(frozen=True)
class StoredSecret:
    """A secret's metadata (never its text): since when it signs and, once rotated out, until when; an Ed25519
    key's public key (``whpk_``, no secret)."""

    id: int
    created_at: float
    expires_at: float | None
    public_key: str | None = None

    @property
    def scheme(self) -> Scheme:
        return ED25519 if self.public_key is not None else HMAC


@dataclass(frozen=True)
class RevealedSecret:
    """A secret's text, only for an explicit reveal or for signing."""

    text: str = ""
    created_at: float = 0.0
    expires_at: float | None = None

    def __repr__(self) -> str:
        return f"RevealedSecret(whsec_***, created_at={self.created_at}, expires_at={self.expires_at})"


@dataclass(frozen=True)
class StoredEndpoint:
    name: str
    tenant: str | None
    url: str
    events: tuple[str, ...]
    options: dict[str, Any]
    managed_by: str
    created_at: float
    updated_at: float
    version: int
    secrets: tuple[StoredSecret, ...] = ()

    @property
    def file_managed(self) -> bool:
        return self.managed_by == FILE

    @property
    def home(self) -> str:
        """``dedicated`` or ``lane``; an endpoint stored without one (created before homes) is dedicated."""
        return str(self.options.get("home") or Endpoint.model_fields["home"].default)

    def fields(self) -> dict[str, Any]:
        """What the API and the CLI show of it (never a secret)."""
        return {
            "name": self.name,
            "tenant": self.tenant,
            "url": self.url,
            "events": list(self.events),
            "home": self.home,
            "options": hidden_json(self.options),  # a secret header's value as ***
            "managed_by": self.managed_by,
            "version": self.version,
        }


def endpoint_options(endpoint: Endpoint, seal: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The fields of ``endpoint`` the store keeps in ``options``: those set explicitly, as JSON values, each
    secret header value sealed by ``seal`` (the store's keys), or left out without it (a file endpoint's)."""
    data: dict[str, Any] = endpoint.model_dump(mode="json", exclude_unset=True, exclude=set(_COLUMNS))
    return sealed_json(data, seal)


def to_endpoint(
    stored: StoredEndpoint, secrets: Sequence[RevealedSecret], open_: Callable[[str], str] | None = None
) -> Endpoint:
    """The Endpoint a worker serves: the stored fields and the secrets that still sign (newest first), each
    rotated-out one with its end, so that the worker stops signing with it then; ``open_`` opens the sealed
    secret header values."""
    data: dict[str, Any] = {
        "name": stored.name,
        "url": stored.url,
        "events": list(stored.events),
        "secret": SigningSecrets(tuple(signing_secret(s.text, s.expires_at) for s in secrets)),
        **stored.options,
    }
    if open_ is not None:  # the sealed secret header values, opened
        data.update(opened_json(stored.options, open_))
    if "tenant" in Endpoint.model_fields:  # the tenant field arrives with the tenants work (issue 15 item 2)
        data["tenant"] = stored.tenant
    return Endpoint.model_validate(data)
