"""The building blocks of the admin API's OpenAPI paths: references, parameters, the error answers."""

from __future__ import annotations

from typing import Any

import warren.api.admin.schemas as s
from warren.topology.catalog import TYPE_PATTERN

__all__ = [
    "_ERRORS", "_NAME", "_REF", "_SECURITY", "_TENANT", "_TYPE", "_WITH_BODY",
    "_body", "_errors", "_json", "_path", "_query", "_state",
]  # fmt: skip

_REF = "#/components/schemas/{model}"
_SECURITY: list[dict[str, list[str]]] = [{"admin": []}]


def _path(name: str, description: str, pattern: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "pattern": pattern}}  # fmt: skip


_NAME = _path("name", "The endpoint's name.", s.NAME_PATTERN)
_TENANT = _path("tenant", "The tenant.", s.TENANT_PATTERN)
_TYPE = _path("name", "The event type.", TYPE_PATTERN)


def _json(schema: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model=schema)}}},
    }


_ERRORS: dict[str, dict[str, Any]] = {
    "400": _json("ErrorBody", "The body is not valid JSON (`malformed_json`)."),
    "401": {
        **_json("ErrorBody", "No admin token, or a wrong one (`unauthorized`); producer tokens are not admin tokens."),
        "headers": {"WWW-Authenticate": {"description": "Bearer challenge.", "schema": {"type": "string"}}},
    },
    "403": _json(
        "ErrorBody",
        "A tenant's key asked for what only an admin token may do, or for another tenant (`forbidden`).",
    ),
    "404": _json(
        "ErrorBody",
        "No endpoint of that name, or, for a tenant's key, none of that tenant (`not_found`); no such key.",
    ),
    "409": _json(
        "ErrorBody",
        "The name is taken (`endpoint_exists`); the endpoint comes from the configuration file and only "
        "`warren setup` changes it (`file_managed`); or RabbitMQ refused the change (`refused`: it holds "
        "messages, or its ordering would change, or the state change does not apply); for a test send, "
        "the endpoint cannot sign (`cannot_send`: its secret's variable is not set here).",
    ),
    "413": _json("ErrorBody", "The body is over `api.max_body` (`payload_too_large`)."),
    "415": _json("ErrorBody", "Content-Type is not `application/json` (`unsupported_media_type`)."),
    "422": _json(
        "ErrorBody",
        "The request breaks the schema (`invalid_request`), or the endpoint would be invalid "
        "(`invalid_endpoint`, e.g. a private address); `fields` names each field.",
    ),
    "503": _json(
        "ErrorBody",
        "The store (`store_unavailable`) or RabbitMQ (`broker_unavailable`) is unreachable: nothing changed.",
    ),
}


def _errors(*codes: str) -> dict[str, Any]:
    return {code: _ERRORS[code] for code in codes}


_WITH_BODY = ("400", "401", "403", "404", "409", "413", "415", "422", "503")


def _body(model: str, *, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": {"$ref": _REF.format(model=model)}}}}


def _state(action: str, summary: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"{action}Endpoint",
            "summary": summary,
            "security": _SECURITY,
            "parameters": [_NAME],
            "requestBody": _body("StateIn", required=False),
            "responses": {
                "200": _json("StateOut", "The state now (`changed`: false if it was already so)."),
                **_errors(*_WITH_BODY),
            },
        }
    }


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}
