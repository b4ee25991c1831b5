"""The admin API's part of ``/openapi.json``: its paths, generated from ``schemas.py``, added to the ingest
API's document when the admin API is enabled."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

import warren.api.admin.schemas as s
from warren.api.admin.key_schemas import PublicKeys
from warren.api.admin.openapi_parts import _NAME, _REF, _SECURITY, _WITH_BODY, _body, _errors, _json, _query, _state
from warren.api.admin.openapi_tenants import tenant_and_catalog_paths

__all__ = ["add_admin_paths"]

_MODELS: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (s.EndpointIn, "validation"),
    (s.EndpointPatch, "validation"),
    (s.RotateIn, "validation"),
    (s.StateIn, "validation"),
    (s.TestIn, "validation"),
    (s.EndpointOut, "serialization"),
    (s.EndpointCreated, "serialization"),
    (s.EndpointPage, "serialization"),
    (s.Rotated, "serialization"),
    (s.RevealedSecrets, "serialization"),
    (PublicKeys, "serialization"),
    (s.StateOut, "serialization"),
    (s.TestOut, "serialization"),
    (s.EventAttempts, "serialization"),
    (s.AttemptPage, "serialization"),
    (s.RecoverOut, "serialization"),
    (s.ReplayIn, "validation"),
    (s.ReplayOut, "serialization"),
    (s.KeyIn, "validation"),
    (s.KeyCreated, "serialization"),
    (s.KeyList, "serialization"),
    (s.SessionIn, "validation"),
    (s.EventTypeIn, "validation"),
    (s.EventTypeOut, "serialization"),
    (s.EventTypeList, "serialization"),
    (s.SessionOut, "serialization"),
]


def add_admin_paths(document: dict[str, Any]) -> None:
    """Add the admin schemas, the ``admin`` security scheme and the ``/v1/endpoints`` paths to ``document``."""
    _, defs = models_json_schema(_MODELS, ref_template=_REF)
    document["components"]["schemas"].update(defs["$defs"])
    document["components"]["securitySchemes"]["admin"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An admin token (`api.admin_tokens`): every tenant. Or a tenant's API key (`wtk_...`, "
        "made by `POST /v1/tenants/{tenant}/keys`): that tenant's endpoints, attempts and events only; another "
        "tenant's endpoint is a 404, as one that does not exist.",
    }
    document["info"]["description"] += (
        " The admin API (`/v1/endpoints`, admin tokens) creates, changes and removes endpoints at runtime,"
        " and reads the attempt log (`/v1/events/{event_id}/attempts`, `/v1/endpoints/{name}/attempts`)."
    )
    list_params = [
        _query("tenant", {"type": "string", "pattern": s.TENANT_PATTERN}, "Only this tenant's endpoints."),
        _query("state", {"type": "string", "enum": list(s.STATES)}, "Only endpoints in this state."),
        _query(
            "event_type",
            {"type": "string", "pattern": s.EVENT_TYPE_PATTERN, "maxLength": 200},
            "Only endpoints subscribed to this event type.",
        ),
        _query("managed_by", {"type": "string", "enum": ["api", "file"]}, "Only API- or file-managed endpoints."),
        _query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "Endpoints per page."),
        _query("cursor", {"type": "string", "pattern": s.NAME_PATTERN}, "`next_cursor` of the previous page."),
    ]
    instant = {"type": "string", "pattern": s.INSTANT_PATTERN}
    attempt_params = [
        _query("status", {"type": "string", "enum": ["failed", "all"], "default": "all"}, "`failed`: not delivered."),
        _query("since", instant, "Attempts at or after: epoch seconds or RFC 3339 (2025-12-01T12:00:00Z)."),
        _query("until", instant, "Attempts before: epoch seconds or RFC 3339."),
        _query("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}, "Attempts per page."),
        _query("cursor", {"type": "string", "maxLength": 400}, "`next_cursor` of the previous page."),
    ]
    one = "/v1/endpoints/{name}"
    document["paths"].update(
        {
            "/v1/endpoints": {
                "get": {
                    "operationId": "listEndpoints",
                    "summary": "List endpoints, by name, a page at a time",
                    "security": _SECURITY,
                    "parameters": list_params,
                    "responses": {"200": _json("EndpointPage", "A page of endpoints."), **_errors("401", "422", "503")},
                },
                "post": {
                    "operationId": "createEndpoint",
                    "summary": "Create an endpoint: stored, declared on RabbitMQ and served by every worker",
                    "security": _SECURITY,
                    "requestBody": _body("EndpointIn"),
                    "responses": {
                        "201": _json("EndpointCreated", "Created; `secret` is shown this once."),
                        **_errors("400", "401", "409", "413", "415", "422", "503"),
                    },
                },
            },
            one: {
                "get": {
                    "operationId": "getEndpoint",
                    "summary": "One endpoint (never its secret)",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "responses": {"200": _json("EndpointOut", "The endpoint."), **_errors("401", "404", "503")},
                },
                "patch": {
                    "operationId": "updateEndpoint",
                    "summary": "Change an endpoint's fields; applied to RabbitMQ and workers before it is stored",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "requestBody": _body("EndpointPatch"),
                    "responses": {"200": _json("EndpointOut", "The endpoint as changed."), **_errors(*_WITH_BODY)},
                },
                "delete": {
                    "operationId": "deleteEndpoint",
                    "summary": "Stop delivery and remove the endpoint",
                    "description": "Its queues and its dead-letter queue are removed, only when empty (else 409 "
                    "`refused`); with `force=true`, what they hold is discarded, and counted in the answer's headers. "
                    "Nothing of it is left for an endpoint created later under the same name.",
                    "security": _SECURITY,
                    "parameters": [
                        _NAME,
                        _query(
                            "force",
                            {"type": "string", "enum": ["true", "false"]},
                            "Remove even when it holds messages.",
                        ),
                    ],
                    "responses": {
                        "204": {
                            "description": "Removed.",
                            "headers": {
                                name: {"description": what, "schema": {"type": "integer", "minimum": 0}}
                                for name, what in (
                                    ("Warren-Discarded-Queued", "Events still queued for it, discarded (force)."),
                                    ("Warren-Discarded-Dead-Letters", "Its dead letters, discarded (force)."),
                                )
                            },
                        },
                        **_errors("401", "404", "409", "422", "503"),
                    },
                },
            },
            one + "/rotate-secret": {
                "post": {
                    "operationId": "rotateEndpointSecret",
                    "summary": "A new signing secret; the old one keeps signing beside it for a grace period",
                    "description": "With `kind: ed25519`, a new Ed25519 key: the Ed25519 keys before it end after the "
                    "grace period, the HMAC secrets sign on (and the other way round); `secret_key` is shown once.",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "requestBody": _body("RotateIn", required=False),
                    "responses": {"200": _json("Rotated", "The new secret (shown this once)."), **_errors(*_WITH_BODY)},
                }
            },
            one + "/secret": {
                "get": {
                    "operationId": "revealEndpointSecret",
                    "summary": "Reveal the endpoint's signing secrets (an explicit reveal; keep it out of logs)",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "responses": {
                        "200": _json("RevealedSecrets", "Every HMAC secret that signs (never an Ed25519 secret key)."),
                        **_errors("401", "404", "409", "503"),
                    },
                }
            },
            one + "/public-keys": {
                "get": {
                    "operationId": "getEndpointPublicKeys",
                    "summary": "The endpoint's Ed25519 public keys (whpk_), which verify its v1a signatures",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "responses": {
                        "200": _json("PublicKeys", "Every Ed25519 key that signs, newest first; none for HMAC only."),
                        **_errors("401", "404", "409", "503"),
                    },
                }
            },
            one + "/pause": _state("pause", "Stop delivering on every worker; messages wait in RabbitMQ"),
            one + "/resume": _state("resume", "Deliver to a paused endpoint again"),
            one + "/disable": _state("disable", "Disable on every worker (kept across restarts)"),
            one + "/enable": _state("enable", "Enable a disabled or paused endpoint"),
            one + "/attempts": {
                "get": {
                    "operationId": "listEndpointAttempts",
                    "summary": "The endpoint's delivery attempts from the attempt log, newest first, a page at a time",
                    "description": "Kept for `store.attempt_retention`. An endpoint the store does not hold "
                    "(deleted, or never stored) is no error: its attempts are listed while they are kept.",
                    "security": _SECURITY,
                    "parameters": [_NAME, *attempt_params],
                    "responses": {"200": _json("AttemptPage", "A page of attempts."), **_errors("401", "422", "503")},
                }
            },
            "/v1/events/{event_id}/attempts": {
                "get": {
                    "operationId": "listEventAttempts",
                    "summary": "Every delivery attempt of one event, across endpoints, in time order",
                    "description": "From the attempt log (kept for `store.attempt_retention`); an event with "
                    "no attempt recorded has an empty list.",
                    "security": _SECURITY,
                    "parameters": [
                        {
                            "name": "event_id",
                            "in": "path",
                            "required": True,
                            "description": "The event's id (`webhook-id`).",
                            "schema": {"type": "string", "pattern": s.EVENT_ID_PATTERN},
                        }
                    ],
                    "responses": {
                        "200": _json("EventAttempts", "The event's attempts."),
                        **_errors("401", "422", "503"),
                    },
                }
            },
            one + "/recover": {
                "post": {
                    "operationId": "recoverEndpoint",
                    "summary": "Send back what failed for good since a moment (the DLQ's letters dead since then)",
                    "description": "Each dead letter of the endpoint that died at or after `since` is published "
                    "to the endpoint again with a fresh retry budget, confirmed, then removed from its DLQ; older "
                    "ones stay. As `warren dlq replay --since`. A lane endpoint's letters are taken out of its lane's "
                    "shared DLQ and sent back to its lane; its lane-mates' stay, in order.",
                    "security": _SECURITY,
                    "parameters": [
                        _NAME,
                        {
                            **_query(
                                "since",
                                {"type": "string", "minLength": 1, "maxLength": 64},
                                "An ISO 8601 time (`2026-05-01T12:00:00Z`; naive is UTC) or a duration ago (`2h`).",
                            ),
                            "required": True,
                        },
                    ],
                    "responses": {
                        "200": _json("RecoverOut", "How many dead letters were sent back."),
                        **_errors("401", "404", "409", "422", "503"),
                    },
                }
            },
            one + "/replay": {
                "post": {
                    "operationId": "replayEndpointEvents",
                    "summary": "Send back chosen dead letters of the endpoint, by event id",
                    "description": "Each dead letter of the endpoint whose event is listed is published to the "
                    "endpoint again with a fresh retry budget, confirmed, then removed from its DLQ; others stay. "
                    "As `warren dlq replay --ids`. A lane endpoint's letters only: its lane-mates' stay, in order.",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "requestBody": _body("ReplayIn"),
                    "responses": {
                        "200": _json("ReplayOut", "How many dead letters were sent back."),
                        **_errors(*_WITH_BODY),
                    },
                }
            },
            **tenant_and_catalog_paths(),
            one + "/test": {
                "post": {
                    "operationId": "testEndpoint",
                    "summary": "Send a signed test event now and return the attempt's outcome",
                    "security": _SECURITY,
                    "parameters": [_NAME],
                    "requestBody": _body("TestIn", required=False),
                    "responses": {
                        "200": _json("TestOut", "The attempt was made: `delivered` says whether the endpoint took it."),
                        **_errors(*_WITH_BODY),
                    },
                }
            },
        }
    )
