"""Field types shared by the configuration models: durations, names, event patterns, signing secrets.

Also ``_Frozen``, the base of every configuration section, and ``_guessable``, the floor under shared secrets.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PlainValidator

from warren.topology.durations import parse_duration
from warren.topology.secrets import (
    ENV_REFERENCE,
    SIGNING_SECRETS,
    SecretError,
    SigningSecrets,
    UnresolvedSecrets,
    deferrable,
    resolve_secret_text,
)
from warren.topology.signing_keys import signing_secret

Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# A tenant is one word of a routing key (no '.', '*' or '#'), a token like an endpoint name but at most 54
# characters: with the '.' and an event type of at most 200 bytes it always fits AMQP's 255-byte routing key.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,53}$"
TENANT_RULE = "a tenant is a token of lowercase letters, digits, '-' and '_' (at most 54)"
_TENANT = re.compile(TENANT_PATTERN)


def check_tenant(value: str) -> str:
    """``value`` when it is a valid tenant name; ValueError naming the rule otherwise."""
    if not isinstance(value, str) or not _TENANT.fullmatch(value):
        raise ValueError(f"{value!r}: {TENANT_RULE}")
    return value


Tenant = Annotated[str, AfterValidator(check_tenant)]
_PATTERN_WORD = re.compile(r"^(?:\*|#|[A-Za-z0-9_\-:/]+)$")


def _parse_secrets(value: object) -> SigningSecrets:
    if isinstance(value, SigningSecrets):
        return value
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
        raise ValueError("secret is a 'whsec_...' or 'whsk_...' string, an 'env:NAME' reference, or a list of them")
    try:
        for text in texts:  # a literal's mistake is the file's: reported whoever loads it
            if not text.startswith(ENV_REFERENCE):
                signing_secret(text)
        try:
            return SigningSecrets(tuple(signing_secret(resolve_secret_text(t)) for t in texts))
        except SecretError as exc:
            if not deferrable(SIGNING_SECRETS):  # a command that signs nothing loads without it
                raise
            return UnresolvedSecrets(tuple(texts), str(exc))
    except SecretError as exc:
        raise ValueError(str(exc)) from None


def _dump_secrets(secrets: SigningSecrets) -> list[str]:
    if isinstance(secrets, UnresolvedSecrets):
        return list(secrets.references)
    return [x.reveal() for x in secrets]


Secrets = Annotated[
    SigningSecrets,
    PlainValidator(_parse_secrets),
    PlainSerializer(_dump_secrets, when_used="json"),
]


def _check_event_pattern(pattern: str) -> str:
    words = pattern.split(".")
    if not pattern or not all(_PATTERN_WORD.fullmatch(w) for w in words):
        raise ValueError(
            f"{pattern!r} is not an event-type pattern: dot-separated words, '*' for one word, '#' for any"
        )
    return pattern


EventPattern = Annotated[str, AfterValidator(_check_event_pattern)]


class _Frozen(BaseModel):
    # TOML writes inf and nan, and the environment "inf": no setting is infinite (the delay chain's levels, a
    # timeout, a rate would overflow or never end), and nan compares false with every bound.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _guessable(text: str, what: str) -> str | None:
    """Why a shared secret is too weak to use: under 16 bytes of UTF-8, or nothing but whitespace."""
    if not text.strip():
        return f"{what} cannot be whitespace only"
    if len(text.encode()) < 16:
        return f"{what} needs at least 16 bytes"
    return None
