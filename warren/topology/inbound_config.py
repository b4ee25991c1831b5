"""The configuration sections for receiving webhooks: inbound sources, the inbox and the receiver."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, PlainSerializer, PlainValidator, SecretStr, field_validator, model_validator

from warren.topology.config_fields import _NAME, PositiveDuration, _Frozen, _guessable
from warren.topology.secrets import (
    INBOUND_SECRETS,
    SecretError,
    SigningSecrets,
    UnresolvedText,
    resolve_or_defer,
    revealed,
)
from warren.topology.settings import RetryOverride, RetryPolicy, _ServerLimits
from warren.topology.signing_keys import verifying_key


def _parse_plain_secrets(value: object) -> tuple[SecretStr, ...]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not texts or not all(isinstance(t, str | SecretStr) for t in texts):
        raise ValueError("secret is a string, an 'env:NAME' reference, or a non-empty list of them")
    resolved: list[SecretStr] = []
    for text in texts:
        if isinstance(text, SecretStr):
            resolved.append(text)
            continue
        plain = resolve_or_defer(text, INBOUND_SECRETS)  # a command that verifies nothing loads without it
        if isinstance(plain, UnresolvedText):
            resolved.append(plain)
            continue
        if not plain:
            raise ValueError("a secret cannot be empty")
        resolved.append(SecretStr(plain))
    return tuple(resolved)


def _strong_plain_secrets(value: tuple[SecretStr, ...] | None) -> tuple[SecretStr, ...] | None:
    """hmac-sha256 and token secrets are guessed or brute-forced when short: the same floor as API tokens."""
    for secret in value or ():
        if isinstance(secret, UnresolvedText):
            continue
        weak = _guessable(secret.get_secret_value(), "a secret")
        if weak:
            raise ValueError(weak)
    return value


PlainSecrets = Annotated[
    tuple[SecretStr, ...],
    PlainValidator(_parse_plain_secrets),
    PlainSerializer(lambda s: [revealed(x) for x in s], when_used="json"),
]

_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_HEADER = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class InboundSource(_Frozen):
    """A provider whose webhooks Warren receives: how to check them, where their id is, who handles them.

    ``verifier`` has no default: a source without a signature must say ``verifier = "none"`` explicitly.
    """

    name: str
    path: str | None = Field(default=None, description="URL path served by `warren receive` (default /in/<name>)")
    verifier: Literal["standard-webhooks", "hmac-sha256", "token", "none"]
    secret: PlainSecrets | None = Field(default=None, repr=False, description="several during a rotation")
    header: str | None = Field(default=None, description="the signature (hmac-sha256) or token (token) header")
    encoding: Literal["hex", "base64"] = "hex"
    signature_prefix: str = Field(default="", description="text before the digest, e.g. 'sha256=' for GitHub")
    tolerance: PositiveDuration = 300.0
    id_header: str | None = None
    id_field: str | None = Field(default=None, description="dotted path into the JSON body, e.g. 'update_id'")
    key_field: str | None = None
    sequence_field: str | None = None
    handler: str = Field(description="'module:function' called once per distinct event")
    retry: RetryOverride | None = None
    max_body: int = Field(default=1024 * 1024, ge=1, description="bytes of one request body")

    @field_validator("name")
    @classmethod
    def _source_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("name is a token of lowercase letters, digits, '-' and '_' (at most 63)")
        return value

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or any(c in value for c in "{}?# ")):
            raise ValueError("path starts with '/' and holds no '{', '}', '?', '#' or spaces")
        return value

    @field_validator("header", "id_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER.fullmatch(value):
            raise ValueError(f"{value!r} is not an HTTP header name")
        return value

    @field_validator("handler")
    @classmethod
    def _module_function(cls, value: str) -> str:
        if not _HANDLER.fullmatch(value):
            raise ValueError("handler is 'package.module:function'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> InboundSource:
        if self.verifier == "none":
            if self.secret is not None:
                raise ValueError("verifier 'none' takes no secret (remove it, or choose a verifier that uses it)")
        elif self.secret is None:
            raise ValueError(f"verifier {self.verifier!r} needs a secret")
        if self.verifier == "standard-webhooks":
            try:
                for text in self.secret or ():
                    if not isinstance(text, UnresolvedText):
                        verifying_key(text.get_secret_value())
            except SecretError as exc:
                raise ValueError(f"secret: {exc}") from None
        if self.verifier in ("hmac-sha256", "token"):
            _strong_plain_secrets(self.secret)
        if self.verifier in ("hmac-sha256", "token") and self.header is None:
            raise ValueError(f"verifier {self.verifier!r} needs the name of its header")
        if self.id_header is not None and self.id_field is not None:
            raise ValueError("give id_header or id_field, not both")
        if self.id_header is None and self.id_field is None and self.verifier != "standard-webhooks":
            raise ValueError("id_header or id_field is needed: the event id is what deduplicates")
        return self

    @property
    def route(self) -> str:
        return self.path or f"/in/{self.name}"

    @property
    def event_id_header(self) -> str | None:
        """The header holding the event id (``webhook-id`` for Standard Webhooks unless told otherwise)."""
        if self.id_header is None and self.id_field is None:
            return "webhook-id"
        return self.id_header

    def signing_secrets(self) -> SigningSecrets:
        """The secrets as Standard Webhooks keys (only for ``verifier = "standard-webhooks"``): ``whsec_`` secrets
        verify ``v1`` signatures, ``whpk_`` public keys ``v1a`` ones."""
        return SigningSecrets(tuple(verifying_key(s.get_secret_value()) for s in self.secret or ()))

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        return self.retry.apply_to(default) if self.retry else default


class InboxSettings(_Frozen):
    """The idempotency store of ``warren inbox`` and how long it remembers event ids."""

    store: str = Field(default="sqlite:///warren-inbox.sqlite3", description="sqlite:///PATH or postgresql://...")
    postgres_schema: str = "public"
    retention: PositiveDuration = 7 * 86400.0
    purge_interval: PositiveDuration = 60.0
    purge_batch: int = Field(default=1000, ge=1, le=100_000)
    concurrency: int = Field(default=16, ge=1, le=2048, description="events handled at once per source")

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("store is 'sqlite:///PATH' or a 'postgresql://' DSN")
        return value

    @field_validator("postgres_schema")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
            raise ValueError("postgres_schema is a lowercase SQL identifier")
        return value


class ReceiverSettings(_ServerLimits):
    """The verifying HTTP endpoint of ``warren receive``."""

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    publish_timeout: PositiveDuration = 5.0
    retry_after: int = Field(default=5, ge=1, le=3600, description="seconds, sent with every 503")
