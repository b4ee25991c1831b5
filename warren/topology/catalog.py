"""The event-type catalog: the event types a platform sends, each with a description and, optionally, a JSON
Schema of its ``data`` per version; what producers are checked against and what customers read.

Declared in the file (``[[event_types]]``) or through the admin API (kept in the store); the two are merged,
the file's entries first. A type may have several versions (one entry each, ``version`` 1, 2, ...): an event is
checked against the newest version's schema, and older versions stay in the catalog for the customers who
still read them. ``deprecated`` marks a version (or a whole type) to be moved off: events of it are still
accepted, and the answer says so. ``[catalog] on_invalid`` says what a schema violation does: ``reject`` (422
naming the first error's path) or ``warn`` (accepted, logged and counted).

Pure: the models, the check and the exports (JSON Schema, AsyncAPI 3.0); schemas are checked with
``jsonschema`` (Draft 2020-12), each compiled once; jsonschema is imported with the first schema, so that a
configuration without one (and a command's --help) does not load it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, JsonValue, field_validator

from warren.topology.config_fields import _Frozen

if TYPE_CHECKING:  # jsonschema loads with the first schema (a third of the configuration's import time)
    from jsonschema import Draft202012Validator

__all__ = [
    "ENVELOPE_SCHEMA",
    "TYPE_PATTERN",
    "Catalog",
    "CatalogSettings",
    "EventTypeSpec",
    "Violation",
    "asyncapi_document",
    "json_schema_bundle",
]

TYPE_PATTERN = r"^[A-Za-z0-9_\-:/]+(?:\.[A-Za-z0-9_\-:/]+)*$"  # an event type, as events carry it (no wildcard)
# The body every endpoint receives (warren/broker/events.py, Event.envelope), for the exports.
ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "type", "timestamp", "data"],
    "properties": {
        "id": {"type": "string", "description": "The event's id, also in the webhook-id header."},
        "type": {"type": "string"},
        "timestamp": {"type": "string", "format": "date-time"},
        "data": {},
        "key": {"type": "string", "description": "The ordering key, when the event has one."},
        "sequence": {"type": "integer", "minimum": 0},
        "tenant": {"type": "string"},
    },
}


class CatalogSettings(_Frozen):
    """``[catalog]``: what a schema violation does at publish."""

    on_invalid: Literal["reject", "warn"] = Field(
        default="reject", description="reject: 422 naming the first error; warn: accepted, logged and counted"
    )


class EventTypeSpec(_Frozen):
    """One version of one event type (``[[event_types]]`` in the file, or ``PUT /v1/event-types/{name}``)."""

    name: str = Field(pattern=TYPE_PATTERN, max_length=200)
    version: int = Field(default=1, ge=1, le=1000)
    description: str = Field(default="", max_length=2000)
    json_schema: dict[str, JsonValue] | None = Field(default=None, description="a JSON Schema (2020-12) of data")
    deprecated: bool = False

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(value)
            except SchemaError as exc:
                where = "/".join(str(p) for p in exc.path) or "(top)"
                raise ValueError(f"not a JSON Schema (2020-12) at {where}: {exc.message}") from None
        return value


@dataclass(frozen=True)
class Violation:
    """Why an event's data breaks its type's schema: the path of the first error (``data.items[0].sku``)."""

    path: str
    message: str
    version: int


@dataclass
class Catalog:
    """Every version of every declared type, newest last per name; validators compiled on first use."""

    specs: tuple[EventTypeSpec, ...] = ()
    on_invalid: Literal["reject", "warn"] = "reject"
    _newest: dict[str, EventTypeSpec] = field(default_factory=dict, init=False, repr=False)
    _validators: dict[tuple[str, int], Draft202012Validator] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.specs = merged(self.specs)
        for spec in self.specs:
            newest = self._newest.get(spec.name)
            if newest is None or spec.version > newest.version:
                self._newest[spec.name] = spec

    def newest(self, event_type: str) -> EventTypeSpec | None:
        return self._newest.get(event_type)

    def violation(self, event_type: str, data: Any) -> Violation | None:
        """The first way ``data`` breaks the newest schema of ``event_type``; None when it fits, when the type
        has no schema, or when the type is not in the catalog (the catalog describes; ``api.allowed_event_types``
        restricts)."""
        spec = self._newest.get(event_type)
        if spec is None or spec.json_schema is None:
            return None
        key = (spec.name, spec.version)
        validator = self._validators.get(key)
        if validator is None:
            from jsonschema import Draft202012Validator

            validator = self._validators[key] = Draft202012Validator(spec.json_schema)
        error = next(iter(sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))), None)
        if error is None:
            return None
        path = "data" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return Violation(path, error.message[:300], spec.version)

    def deprecated(self, event_type: str) -> bool:
        spec = self._newest.get(event_type)
        return spec is not None and spec.deprecated


def merged(specs: Iterable[EventTypeSpec]) -> tuple[EventTypeSpec, ...]:
    """One entry per (name, version), the first given winning (the file's before the store's), sorted."""
    seen: dict[tuple[str, int], EventTypeSpec] = {}
    for spec in specs:
        seen.setdefault((spec.name, spec.version), spec)
    return tuple(sorted(seen.values(), key=lambda s: (s.name, s.version)))


def json_schema_bundle(specs: Sequence[EventTypeSpec]) -> dict[str, Any]:
    """Every type's schemas as one JSON Schema document: ``$defs`` keyed ``<name>.v<version>``."""
    defs: dict[str, Any] = {}
    for spec in specs:
        entry: dict[str, Any] = dict(spec.json_schema or {})
        entry.setdefault("description", spec.description)
        if spec.deprecated:
            entry["deprecated"] = True
        defs[f"{spec.name}.v{spec.version}"] = entry
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": defs}


def asyncapi_document(specs: Sequence[EventTypeSpec], title: str = "Webhooks") -> dict[str, Any]:
    """An AsyncAPI 3.0 document of the webhooks: one channel and message per type (its newest version), the
    payload the delivered envelope with ``data`` as the type's schema."""
    newest: dict[str, EventTypeSpec] = {}
    for spec in specs:
        if spec.name not in newest or spec.version > newest[spec.name].version:
            newest[spec.name] = spec
    channels: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for name, spec in sorted(newest.items()):
        ident = name.replace(".", "_").replace(":", "_").replace("/", "_")
        payload = {**ENVELOPE_SCHEMA, "properties": {**ENVELOPE_SCHEMA["properties"], "data": spec.json_schema or {}}}
        messages[ident] = {
            "name": name,
            "title": name,
            "summary": spec.description,
            "payload": payload,
            **({"deprecated": True} if spec.deprecated else {}),
        }
        channels[ident] = {"address": name, "messages": {ident: {"$ref": f"#/components/messages/{ident}"}}}
        operations[f"receive_{ident}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{ident}"},
            "summary": f"{name} (version {spec.version}), POSTed to each subscribed endpoint, signed",
        }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": title, "version": "1"},
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages},
    }
