"""The OpenAPI 3.1 document of the ingest API, generated from the pydantic models and the configuration.

It is built once at start-up from the same models the handlers validate with, and carries the configured
limits (``maxItems`` of a batch, the Idempotency-Key length), so it describes this server, not a generic one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import warren.api.ingest.schemas as s
from warren.api.ingest.accept import IDEMPOTENCY_HEADER, batch_key_max_length

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (s.EventIn, "validation"),
    (s.BatchIn, "validation"),
    (s.Accepted, "serialization"),
    (s.BatchAccepted, "serialization"),
    (s.ErrorBody, "serialization"),
    (s.Health, "serialization"),
]


def _json(schema: str, description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model=schema)}}},
    }
    if headers:
        response["headers"] = headers
    return response


_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}, "required": True}
}
_CHALLENGE = {"WWW-Authenticate": {"description": "Bearer challenge.", "schema": {"type": "string"}, "required": True}}


def _errors(*, batch: bool, keys: bool) -> dict[str, Any]:
    what = "Some events" if batch else "The event"
    in_progress = (
        " Or a request with the same Idempotency-Key is still being handled (`idempotency_in_progress`): "
        "retry after `Retry-After` seconds."
        if keys
        else ""
    )
    conflict = " Or the Idempotency-Key was already used with another request (`idempotency_conflict`)." if keys else ""
    store = " Or the idempotency store is unavailable (`store_unavailable`)." if keys else ""
    return {
        "400": _json("ErrorBody", "The body is not valid JSON, or an object in it repeats a key (`malformed_json`)."),
        "401": _json("ErrorBody", "No bearer token, or a wrong one (`unauthorized`).", _CHALLENGE),
        "403": _json(
            "ErrorBody",
            "Sent with a tenant's API key, an event names another tenant (`forbidden`, `fields` names each): "
            "nothing is stored.",
        ),
        "408": _json("ErrorBody", "The body did not arrive within `api.body_timeout` (`request_timeout`)."),
        "409": _json(
            "ErrorBody",
            f"{what} matched no endpoint subscription (`unroutable`): nothing is stored"
            + (", `failed` says which." if batch else ".")
            + in_progress,
        ),
        "413": _json(
            "ErrorBody",
            "The body is over `api.max_body`, or an event's webhook body over `delivery.max_payload` "
            "(`payload_too_large`). Nothing is stored.",
        ),
        "415": _json("ErrorBody", "Content-Type is not `application/json` (`unsupported_media_type`)."),
        "422": _json(
            "ErrorBody",
            "Schema violation (`invalid_event`, `fields` names each field) or an event type not in "
            "`api.allowed_event_types` (`event_type_not_allowed`). Nothing is stored." + conflict,
        ),
        "503": _json(
            "ErrorBody",
            "RabbitMQ is unreachable or did not confirm (`broker_unavailable`): not stored. Retry after "
            "`Retry-After` seconds with the same Idempotency-Key or ids." + store,
            _RETRY_AFTER,
        ),
    }


def _idempotency(max_length: int, batch: bool, keys: bool) -> dict[str, Any]:
    becomes = (
        "`<key>.<index>` becomes the id of each event without its own `id`"
        if batch
        else ("the key becomes the event id (unless the body has an `id`)")
    )
    return {
        "name": IDEMPOTENCY_HEADER,
        "in": "header",
        "required": False,
        "description": f"Makes retries of this request produce the same webhook-ids: {becomes}. "
        + (
            "This server remembers keys (`api.idempotency_store`): a retry with the same body gets the first "
            "202 again (`Idempotent-Replayed: true`) without publishing; another body with the key is 422."
            if keys
            else "This server keeps no table of keys: a retried request is published again and receivers "
            "drop the duplicate by webhook-id; another body with the same key is not detected."
        ),
        "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_\-.:]+$", "minLength": 1, "maxLength": max_length},
    }


def openapi_document(
    *,
    max_batch: int,
    max_body: int,
    max_payload: int,
    allowed_event_types: tuple[str, ...] | None,
    idempotency_store: bool = False,
) -> dict[str, Any]:
    """The document served at ``/openapi.json``; ``idempotency_store`` says whether this server remembers keys."""
    keys = idempotency_store
    _, defs = models_json_schema(_MODELS, ref_template=_REF)
    schemas: dict[str, Any] = defs["$defs"]
    schemas["BatchIn"]["properties"]["events"]["maxItems"] = max_batch
    if allowed_event_types is not None:
        schemas["EventIn"]["properties"]["type"]["description"] += (
            " Allowed here: " + ", ".join(f"`{p}`" for p in allowed_event_types) + " (else 422)."
        )
    limits = f"Bodies up to {max_body} bytes; each webhook body up to {max_payload} bytes."
    replayed = (
        {
            "Idempotent-Replayed": {
                "description": "`true` on a stored answer replayed for a retry.",
                "schema": {"type": "string"},
                "required": False,
            }
        }
        if keys
        else None
    )
    single_ok = _json("Accepted", "RabbitMQ confirmed the event: it is stored and will be delivered.", replayed)
    batch_ok = _json("BatchAccepted", "RabbitMQ confirmed every event.", replayed)
    partial = _json(
        "BatchAccepted",
        "Some events are stored (`ids`), some are not (`failed`, with the reason). Retry only the failed ones, "
        "or the whole batch with the same Idempotency-Key (duplicates share their webhook-id).",
        {"Retry-After": {**_RETRY_AFTER["Retry-After"], "required": False}},
    )
    health = _json("Health", "The process is alive.")
    ready = _json("Health", "Connected to RabbitMQ and the events exchange exists.")
    not_ready = _json("Health", "Not connected, or the events exchange is missing (`reason`).")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Warren ingest API",
            "version": "1",
            "description": "Publish events to Warren over HTTP. A 2xx means RabbitMQ confirmed the event "
            f"(stored durably); any other answer means it was not stored. {limits}",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/v1/events": {
                "post": {
                    "operationId": "publishEvent",
                    "summary": "Publish one event",
                    "security": [{"bearer": []}],
                    "parameters": [_idempotency(200, batch=False, keys=keys)],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": _REF.format(model="EventIn")}}},
                    },
                    "responses": {"202": single_ok, **_errors(batch=False, keys=keys)},
                }
            },
            "/v1/events/batch": {
                "post": {
                    "operationId": "publishEvents",
                    "summary": f"Publish up to {max_batch} events",
                    "description": "Validation is all-or-nothing (4xx: nothing is published); publishing is "
                    "per event: 202 all stored, 207 some stored, 409/503 none stored.",
                    "security": [{"bearer": []}],
                    "parameters": [_idempotency(batch_key_max_length(max_batch), batch=True, keys=keys)],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": _REF.format(model="BatchIn")}}},
                    },
                    "responses": {"202": batch_ok, "207": partial, **_errors(batch=True, keys=keys)},
                }
            },
            "/healthz": {"get": {"operationId": "health", "summary": "Liveness", "responses": {"200": health}}},
            "/readyz": {
                "get": {
                    "operationId": "ready",
                    "summary": "Readiness",
                    "responses": {"200": ready, "503": not_ready},
                }
            },
        },
    }
