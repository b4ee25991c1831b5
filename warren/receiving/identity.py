"""Where an inbound event's id, ordering key and sequence are: a header or a field of the JSON body.

The id is what deduplicates, so it must be the provider's own stable id for the event (GitHub's
``X-GitHub-Delivery``, Telegram's ``update_id``, Standard Webhooks' ``webhook-id``), never something the
provider changes when it resends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from warren.core.digits import ascii_int
from warren.core.strict_json import DUPLICATE_KEY, duplicate_key
from warren.receiving.errors import IdentityError
from warren.receiving.headers import header
from warren.topology.config import InboundSource
from warren.topology.headers import MAX_HEADER_INT

__all__ = ["MAX_ID_BYTES", "SOURCE_WIDE_KEY", "Identity", "field_at", "identify"]

MAX_ID_BYTES = 200  # the id becomes the AMQP message_id (a short string) and a primary key
SOURCE_WIDE_KEY = ""  # a sequence without key_field orders the whole source (Telegram's update_id)

_MISSING = object()


@dataclass(frozen=True)
class Identity:
    """What the idempotent consumer needs: the id, and the key and sequence when the source has them."""

    id: str
    key: str | None = None
    sequence: int | None = None


def field_at(document: Any, path: str) -> Any:
    """The value at a dotted path (``data.order.id``; ASCII digits index lists), or raise KeyError."""
    node = document
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and (index := ascii_int(part)) is not None and index < len(node):
            node = node[index]
        else:
            raise KeyError(path)
    return node


def _scalar(value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise IdentityError(f"{what} must be a string or an integer")
    text = str(value)
    if not text or len(text.encode()) > MAX_ID_BYTES:
        raise IdentityError(f"{what} must be 1-{MAX_ID_BYTES} bytes")
    return text


def identify(source: InboundSource, headers: Mapping[str, str], body: bytes) -> Identity:
    """Read the id, key and sequence of a request as the source's configuration says; IdentityError if not."""
    document: Any = _MISSING

    def from_body(path: str, what: str) -> Any:
        nonlocal document
        if document is _MISSING:
            try:
                document = orjson.loads(body)
            except orjson.JSONDecodeError:
                raise IdentityError(f"the body is not JSON, so {what} ({path!r}) cannot be read") from None
            duplicate = duplicate_key(body, document)
            if duplicate is not None:
                # Which copy is the id depends on the parser: refuse rather than guess.
                raise IdentityError(f"the body has a {DUPLICATE_KEY.format(duplicate)}, so {what} is ambiguous")
        try:
            return field_at(document, path)
        except KeyError:
            return _MISSING

    id_header = source.event_id_header
    if id_header is not None:
        raw_id: Any = header(headers, id_header)
        if not raw_id:
            raise IdentityError(f"missing header {id_header} (the event id)")
    else:
        assert source.id_field is not None
        raw_id = from_body(source.id_field, "the event id")
        if raw_id is _MISSING:
            raise IdentityError(f"the body has no field {source.id_field!r} (the event id)")
    event_id = _scalar(raw_id, "the event id")

    key: str | None = None
    if source.key_field is not None:
        raw_key = from_body(source.key_field, "the ordering key")
        key = None if raw_key is _MISSING or raw_key is None else _scalar(raw_key, "the ordering key")

    sequence: int | None = None
    if source.sequence_field is not None:
        raw_seq = from_body(source.sequence_field, "the sequence")
        if raw_seq is not _MISSING and raw_seq is not None:
            if isinstance(raw_seq, bool) or not isinstance(raw_seq, int) or abs(raw_seq) > MAX_HEADER_INT:
                # orjson reads integers up to 2^64 - 1; an AMQP header holds a signed 64-bit one (a larger one
                # failed the publish with TypeError: a 500)
                raise IdentityError(
                    f"the sequence ({source.sequence_field!r}) must be an integer within ±{MAX_HEADER_INT}"
                )
            sequence = raw_seq
            if source.key_field is None:
                key = SOURCE_WIDE_KEY
    return Identity(event_id, key, sequence)
