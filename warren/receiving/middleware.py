"""Verification for aiohttp: a middleware for a whole app, or a wrapper for one handler.

Both read the raw body (aiohttp caches it, so the handler's own ``await request.read()`` gets the same
bytes), run the verifier, and answer ``401`` with a JSON body when it fails::

    {"error": "unauthorized", "reason": "no_matching_signature", "message": "..."}

Bodies over ``max_body`` get ``413`` before being read when the client declared their length; the app's
``client_max_size`` bounds the rest, so set it at least as high (``web.Application(client_max_size=...)``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from warren.core.errors import WarrenError
from warren.receiving.errors import VerificationError
from warren.receiving.headers import undecodable
from warren.receiving.verifiers import Verifier

__all__ = ["DEFAULT_MAX_BODY", "error_response", "read_body", "verification_middleware", "verified_handler"]

DEFAULT_MAX_BODY = 1024 * 1024

log = logging.getLogger("warren.receive")

BodyHandler = Callable[[web.Request, bytes], Awaitable[web.StreamResponse]]


def error_response(status: int, error: str, message: str, **extra: Any) -> web.Response:
    """The JSON error every receiving endpoint answers with."""
    return web.json_response({"error": error, "message": message, **extra}, status=status)


class BodyTooLarge(WarrenError):
    """A request body over the limit (answered 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")
        self.limit = limit


class BodyTimeout(WarrenError):
    """A request body that did not arrive within its read timeout (answered 408)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"the body did not arrive within {timeout:g}s")


async def read_body(request: web.Request, max_body: int, timeout: float | None = None) -> bytes:
    """The raw body, refusing declared or actual sizes over ``max_body``, and a body slower than ``timeout``."""
    if request.content_length is not None and request.content_length > max_body:
        raise BodyTooLarge(max_body)
    try:
        async with asyncio.timeout(timeout):
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BodyTooLarge(max_body) from None
    except TimeoutError:
        raise BodyTimeout(timeout or 0) from None
    if len(body) > max_body:
        raise BodyTooLarge(max_body)
    return body


async def _verify(
    request: web.Request, verifier: Verifier, max_body: int, body_timeout: float | None = None
) -> bytes | web.Response:
    try:
        body = await read_body(request, max_body, body_timeout)
    except BodyTooLarge as exc:
        return error_response(413, "payload_too_large", str(exc))
    except BodyTimeout as exc:
        response = error_response(408, "request_timeout", str(exc))
        response.force_close()
        return response
    try:
        bad = undecodable(request.headers)
        if bad is not None:
            raise VerificationError("malformed_header", f"header {bad} is not valid UTF-8")
        verifier.verify(request.headers, body)
    except VerificationError as exc:
        # Logged without headers or body: they may hold what an attacker wants echoed back.
        log.warning("rejected %s %s from %s: %s", request.method, request.path, request.remote, exc.reason)
        return error_response(401, "unauthorized", str(exc), reason=exc.reason)
    return body


def verification_middleware(verifier: Verifier, *, max_body: int = DEFAULT_MAX_BODY) -> Middleware:
    """Verify every request of the app it is added to: ``web.Application(middlewares=[...])``."""

    @web.middleware
    async def verify_request(request: web.Request, handler: Handler) -> web.StreamResponse:
        outcome = await _verify(request, verifier, max_body)
        if isinstance(outcome, web.Response):
            return outcome
        return await handler(request)

    return verify_request


def verified_handler(
    verifier: Verifier, handler: BodyHandler, *, max_body: int = DEFAULT_MAX_BODY, body_timeout: float | None = None
) -> Handler:
    """A route handler that verifies first, then calls ``handler(request, body)`` with the verified body.

    ``body_timeout`` (seconds) bounds how long the body may take to arrive: 408 after it.
    """

    async def verified(request: web.Request) -> web.StreamResponse:
        outcome = await _verify(request, verifier, max_body, body_timeout)
        if isinstance(outcome, web.Response):
            return outcome
        return await handler(request, outcome)

    return verified
