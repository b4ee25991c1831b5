"""Reading a request body into a model: content type (415), size (413, before reading it whole), JSON (400),
schema (422 naming the field)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from warren.api.ingest.errors import (
    BAD_JSON,
    INVALID,
    PAYLOAD_TOO_LARGE,
    REQUEST_TIMEOUT,
    UNSUPPORTED_MEDIA_TYPE,
    ApiError,
    FieldProblem,
)
from warren.core.strict_json import DUPLICATE_KEY, duplicate_key

__all__ = [
    "check_content_type",
    "field_path",
    "invalid",
    "parse_body",
    "read_limited",
    "too_large",
    "validation_problems",
]

M = TypeVar("M", bound=BaseModel)

_JSON_TYPES = frozenset({"application/json"})
_MAX_LISTED = 20  # field problems returned in one response; the rest are counted in the message


def too_large(limit: int) -> ApiError:
    return ApiError(413, PAYLOAD_TOO_LARGE, f"request body is over the limit of {limit} bytes (api.max_body)")


def check_content_type(request: web.Request) -> None:
    if request.content_type not in _JSON_TYPES:
        shown = request.headers.get("Content-Type") or "none"
        raise ApiError(415, UNSUPPORTED_MEDIA_TYPE, f"Content-Type must be application/json, not {shown}")
    charset = request.charset
    if charset is not None and charset.lower().replace("-", "") != "utf8":
        raise ApiError(415, UNSUPPORTED_MEDIA_TYPE, f"JSON must be UTF-8, not charset={charset}")


async def read_limited(request: web.Request, limit: int, timeout: float | None = None) -> bytes:
    """The body, refusing with 413 as soon as it is known to be over ``limit``, and 408 after ``timeout``.

    A declared Content-Length over the limit is refused before a byte is read; a chunked body is read
    piece by piece and refused the moment it passes the limit, so an oversized body never sits in memory.
    """
    declared = request.content_length
    if declared is not None and declared > limit:
        raise too_large(limit)
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.content.iter_any():
                body += chunk
                if len(body) > limit:
                    raise too_large(limit)
    except TimeoutError:
        raise ApiError(
            408,
            REQUEST_TIMEOUT,
            f"the body did not arrive within {timeout:g}s (api.body_timeout)",
            headers={"Connection": "close"},
        ) from None
    return bytes(body)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("events", 3, "type")`` -> ``events[3].type``; the empty location is the body itself."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(body)"


def validation_problems(error: ValidationError) -> list[FieldProblem]:
    problems = []
    for detail in error.errors(include_url=False, include_input=False, include_context=False):
        message = detail["msg"].removeprefix("Value error, ")
        problems.append(FieldProblem(field_path(tuple(detail["loc"])), message))
    return problems


def invalid(problems: list[FieldProblem]) -> ApiError:
    """A 422 naming the first problem in its message and listing up to 20 in ``fields``."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ApiError(422, INVALID, f"{first.field}: {first.message}{more}", fields=problems[:_MAX_LISTED])


async def parse_body(
    request: web.Request,
    model: type[M],
    limit: int,
    before: Callable[[bytes], None] | None = None,
    timeout: float | None = None,
) -> M:
    """Check, read and validate the body as ``model``; every failure is an ApiError with its status.

    ``before`` sees the raw bytes first, to refuse what is cheap to refuse before parsing them whole.
    """
    check_content_type(request)
    raw = await read_limited(request, limit, timeout)
    if before is not None:
        before(raw)
    duplicate = duplicate_key(raw)
    if duplicate is not None:
        raise ApiError(400, BAD_JSON, "request body is not valid JSON: " + DUPLICATE_KEY.format(duplicate))
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        # One pass parses and validates; malformed JSON shows as a json_invalid error at the top.
        for detail in exc.errors(include_url=False, include_input=False):
            if detail["type"] == "json_invalid":
                reason = detail.get("ctx", {}).get("error", "not valid JSON")
                raise ApiError(400, BAD_JSON, f"request body is not valid JSON: {reason}") from None
        raise invalid(validation_problems(exc)) from None
