"""Live endpoint records: what the admin side announces on ``<prefix>.endpoints`` and workers apply.

One record per change: ``apply`` carries the endpoint's whole configuration, ``remove`` only its name. The
endpoints stream keeps every record; the latest ``version`` per endpoint wins, so a worker reading the stream from
the start, or hearing the broadcast, ends with the same set. Versions are epoch milliseconds, bumped past the last
one this process wrote.

Workers sign with the endpoint's secrets and read no database, so the record carries them, but sealed: each one a
Fernet token under the store's keys (``[store] keys``, warren/store/keys.py), and the record says so with
``"sealed": "fernet"``. RabbitMQ keeps the stream on disk; it never holds a secret in plain text. A worker opens
them with the same keys (any configured key opens a token, so keys rotate as the store's do). A record whose
secrets are not sealed (written before they were) is refused where a secret is needed, with a clear error; the
rest of its configuration still counts for ``warren setup``'s plan, which signs nothing.

A secret that a rotation replaced carries its end (``"secret_expires"``, epoch seconds, one entry per secret):
the worker stops signing with it then, by itself, so no sweep or re-announcement has to run on time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage
from pydantic import AfterValidator, BaseModel, TypeAdapter, ValidationError, model_validator

from warren.core.errors import WarrenError
from warren.core.strict_records import Number, Text, Whole, read, shown
from warren.store.keys import Sealer, StoreKeyError
from warren.topology.config import Endpoint
from warren.topology.endpoint_headers import hidden_json, opened_json, sealed_json
from warren.topology.secrets import SecretError, SigningSecrets, UnresolvedSecrets
from warren.topology.signing_keys import signing_secret

__all__ = [
    "APPLY",
    "REMOVE",
    "SEALED_WITH",
    "EndpointRecord",
    "SecretsUnavailable",
    "decode_record",
    "latest_per_endpoint",
    "next_version",
]

APPLY: Literal["apply"] = "apply"
REMOVE: Literal["remove"] = "remove"
log = logging.getLogger("warren.live")

SEALED_WITH = "fernet"  # the record's "sealed": its config's secrets are Fernet tokens under the store's keys


class SecretsUnavailable(WarrenError, ValueError):
    """An apply record's secrets cannot be opened here: no store key, a wrong one, or a record not sealed."""


_last_version = 0


def next_version() -> int:
    """Epoch ms, strictly above the last version this process handed out (two changes in one ms stay ordered)."""
    global _last_version
    _last_version = max(int(time.time() * 1000), _last_version + 1)
    return _last_version


@dataclass(frozen=True)
class EndpointRecord:
    """One live change of one endpoint."""

    endpoint: str
    action: Literal["apply", "remove"]
    version: int
    by: str
    config: dict[str, Any] | None = None  # the endpoint as JSON (``apply`` only), its secrets sealed
    sealed: bool = True  # False: an apply record written before secrets were sealed (refused by endpoint_config)
    secret_expires: tuple[float | None, ...] = ()  # each secret's end (epoch s), None while it has none
    routing_closed: bool = False  # served, but routed to no more: an ordered promotion under way (ordered_promotion.py)

    @classmethod
    def applying(cls, endpoint: Endpoint, by: str, sealer: Sealer) -> EndpointRecord:
        config = endpoint.model_dump(mode="json", exclude_defaults=True)
        config = sealed_json(config, sealer.seal)  # secret header values, like the signing secrets
        config["secret"] = [sealer.seal(text) for text in config["secret"]]
        expires = tuple(secret.expires_at for secret in endpoint.secret)
        return cls(endpoint.name, APPLY, next_version(), by, config, secret_expires=expires)

    @classmethod
    def removing(cls, name: str, by: str) -> EndpointRecord:
        return cls(name, REMOVE, next_version(), by)

    @classmethod
    def file_routing(cls, name: str, by: str, *, closed: bool) -> EndpointRecord:
        """A file endpoint's routing closed (``warren setup`` promoting it, ordered: ordered_promotion.py) or open
        again. A remove record, so that no live endpoint of the name is read from it (live_set.py), and no secret
        is needed to write it; workers whose file has the endpoint honour its routing alone (live_endpoints.py)."""
        return cls(name, REMOVE, next_version(), by, routing_closed=closed)

    def endpoint_config(self, sealer: Sealer | StoreKeyError) -> Endpoint:
        """The endpoint this record applies, its secrets opened with ``sealer`` (the store's keys).

        ``sealer`` is the StoreKeyError that building it raised when this process has no usable key. Raises
        SecretsUnavailable when the secrets cannot be opened, ValueError when the endpoint cannot be built here.
        """
        config = self._config()
        if not self.sealed:
            raise SecretsUnavailable(
                f"record of {self.endpoint!r} carries its secrets unsealed (written before announcements sealed "
                "them); refused: apply the endpoint again (`warren endpoint update` or the admin API) to reseal it"
            )
        if isinstance(sealer, StoreKeyError):
            raise SecretsUnavailable(
                f"endpoint {self.endpoint!r}: its signing secrets are sealed with the store's keys and this process "
                f"has none usable ({sealer}); give it [store] keys (or WARREN_STORE_KEY) as the admin side has them"
            )
        try:
            opened = [sealer.open(token) if isinstance(token, str) else "" for token in config.get("secret", [])]
            config = opened_json(config, sealer.open)
        except StoreKeyError:
            raise SecretsUnavailable(
                f"endpoint {self.endpoint!r}: its signing secrets open with none of [store] keys (a wrong key, or "
                "the key that sealed them was removed); give this process the admin side's keys"
            ) from None
        try:
            ends = [*self.secret_expires, *[None] * (len(opened) - len(self.secret_expires))]
            secrets = SigningSecrets(tuple(signing_secret(text, end) for text, end in zip(opened, ends, strict=False)))
        except SecretError as exc:
            raise ValueError(f"endpoint {self.endpoint!r}: {exc}") from None
        return self._validated({**config, "secret": secrets})

    def endpoint_layout(self) -> Endpoint:
        """The endpoint without its secrets (left sealed, never opened): enough to plan its RabbitMQ objects."""
        config = self._config()
        references = tuple(t for t in config.get("secret", []) if isinstance(t, str)) if self.sealed else ("unsealed",)
        placeholder = UnresolvedSecrets(references or ("none",), f"the secrets of {self.endpoint!r} were not opened")
        return self._validated({**hidden_json(config, "sealed"), "secret": placeholder})

    def _config(self) -> dict[str, Any]:
        if self.config is None:
            raise ValueError(f"record of {self.endpoint!r} carries no configuration")
        return self.config

    def _validated(self, config: dict[str, Any]) -> Endpoint:
        try:
            return Endpoint.model_validate(config)
        except ValidationError as exc:
            raise ValueError(f"endpoint {self.endpoint!r}: {exc}") from None

    def to_message(self) -> Message:
        body = {"endpoint": self.endpoint, "action": self.action, "version": self.version, "by": self.by}
        if self.config is not None:
            body["config"] = self.config
            if self.sealed:
                body["sealed"] = SEALED_WITH
            if any(end is not None for end in self.secret_expires):
                body["secret_expires"] = list(self.secret_expires)
        if self.routing_closed:
            body["routing"] = "closed"
        return Message(orjson.dumps(body), content_type="application/json", delivery_mode=DeliveryMode.PERSISTENT)

    @classmethod
    def from_bytes(cls, body: bytes) -> EndpointRecord:
        """Parse a record; ValueError when the body is not one (a stray message must not break a worker)."""
        wire = read(_RECORD, body)
        return cls(
            wire.endpoint,
            wire.action,
            wire.version,
            wire.by,
            wire.config if wire.action == APPLY else None,
            sealed=wire.sealed is not None or wire.action != APPLY,
            secret_expires=tuple(wire.secret_expires),
            routing_closed=wire.routing == "closed",
        )


def _known_seal(sealed: str | None) -> str | None:
    if sealed is not None and sealed != SEALED_WITH:
        raise ValueError(f"secrets sealed with {shown(sealed)}, unknown here (this release knows {SEALED_WITH!r})")
    return sealed


class _Wire(BaseModel):
    """A record as ``to_message`` writes it (and every release before wrote it); other keys are ignored."""

    endpoint: Text
    action: Literal["apply", "remove"]
    version: Whole
    by: Text = ""
    config: dict[str, Any] | None = None  # apply only
    sealed: Annotated[Text | None, AfterValidator(_known_seal)] = None  # absent: written before records were sealed
    secret_expires: list[Number | None] = []  # each secret's end (epoch s) or null; absent: none ends
    routing: Literal["closed"] | None = None  # absent: routed to as its config says

    @model_validator(mode="after")
    def _apply_carries_config(self) -> _Wire:
        if self.action == APPLY and self.config is None:
            raise ValueError("an apply record carries the endpoint's config")
        return self


_RECORD = TypeAdapter(_Wire)


def decode_record(message: AbstractIncomingMessage) -> EndpointRecord | None:
    """The record a message carries; None for a message that is not a record."""
    try:
        return EndpointRecord.from_bytes(message.body)
    except ValueError as exc:
        log.warning("a message on the endpoints exchange or stream is not a record this release reads: %s", exc)
        return None


def latest_per_endpoint(records: list[EndpointRecord]) -> dict[str, EndpointRecord]:
    """The record in force for each endpoint: the highest version (the stream's later one on a tie)."""
    latest: dict[str, EndpointRecord] = {}
    for record in records:
        known = latest.get(record.endpoint)
        if known is None or record.version >= known.version:
            latest[record.endpoint] = record
    return latest
