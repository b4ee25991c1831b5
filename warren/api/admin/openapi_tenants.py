"""The admin API's OpenAPI paths under ``/v1/tenants`` (keys, portal sessions) and ``/v1/event-types``."""

from __future__ import annotations

from typing import Any

from warren.api.admin.openapi_parts import (
    _REF,
    _SECURITY,
    _TENANT,
    _TYPE,
    _WITH_BODY,
    _body,
    _errors,
    _json,
    _path,
    _query,
)

__all__ = ["tenant_and_catalog_paths"]


def tenant_and_catalog_paths() -> dict[str, Any]:
    return {
        "/v1/tenants/{tenant}/keys": {
            "post": {
                "operationId": "createTenantKey",
                "summary": "Make an API key confined to one tenant (shown once)",
                "security": _SECURITY,
                "parameters": [_TENANT],
                "requestBody": _body("KeyIn", required=False),
                "responses": {
                    "201": _json("KeyCreated", "The key, in `key`: it is never shown again."),
                    **_errors("400", "401", "403", "413", "415", "422", "503"),
                },
            },
            "get": {
                "operationId": "listTenantKeys",
                "summary": "A tenant's API keys, revoked ones too (never the keys themselves)",
                "security": _SECURITY,
                "parameters": [_TENANT],
                "responses": {"200": _json("KeyList", "The keys."), **_errors("401", "403", "422", "503")},
            },
        },
        "/v1/event-types": {
            "get": {
                "operationId": "listEventTypes",
                "summary": "The event-type catalog: every version of every type (any credential)",
                "security": _SECURITY,
                "parameters": [
                    _query(
                        "format",
                        {"type": "string", "enum": ["list", "jsonschema", "asyncapi"], "default": "list"},
                        "`jsonschema`: one JSON Schema document; `asyncapi`: an AsyncAPI 3.0 document.",
                    )
                ],
                "responses": {
                    "200": {
                        "description": "The catalog; with `format`, the export asked for.",
                        "content": {
                            "application/json": {
                                "schema": {"anyOf": [{"$ref": _REF.format(model="EventTypeList")}, {"type": "object"}]}
                            }
                        },
                    },
                    **_errors("401", "422", "503"),
                },
            }
        },
        "/v1/event-types/{name}": {
            "put": {
                "operationId": "putEventType",
                "summary": "Declare one version of an event type, or replace it",
                "security": _SECURITY,
                "parameters": [_TYPE],
                "requestBody": _body("EventTypeIn"),
                "responses": {
                    "200": _json("EventTypeOut", "Replaced."),
                    "201": _json("EventTypeOut", "Declared."),
                    **_errors(*_WITH_BODY),
                },
            },
            "delete": {
                "operationId": "deleteEventType",
                "summary": "Remove one version (`version`) or every version of a type declared through the API",
                "security": _SECURITY,
                "parameters": [
                    _TYPE,
                    _query("version", {"type": "integer", "minimum": 1, "maximum": 1000}, "Only this version."),
                ],
                "responses": {"204": {"description": "Removed."}, **_errors("401", "403", "404", "422", "503")},
            },
        },
        "/v1/tenants/{tenant}/sessions": {
            "post": {
                "operationId": "createPortalSession",
                "summary": "Mint a short-lived credential of one tenant, for its browser (the portal)",
                "description": "The token works as the tenant's key on the admin API until `expires_at`; it "
                "is not stored and cannot be revoked before then.",
                "security": _SECURITY,
                "parameters": [_TENANT],
                "requestBody": _body("SessionIn", required=False),
                "responses": {
                    "201": _json("SessionOut", "The session."),
                    **_errors("400", "401", "403", "413", "415", "422", "503"),
                },
            }
        },
        "/v1/tenants/{tenant}/keys/{key_id}": {
            "delete": {
                "operationId": "revokeTenantKey",
                "summary": "Revoke a tenant's API key: refused from the next request on",
                "security": _SECURITY,
                "parameters": [
                    _TENANT,
                    _path("key_id", "The key's id (`id` in the list).", "^[0-9a-f]{16}$"),
                ],
                "responses": {"204": {"description": "Revoked."}, **_errors("401", "403", "404", "422", "503")},
            }
        },
    }
