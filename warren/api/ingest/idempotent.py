"""Answering a request once per Idempotency-Key, when the API has an idempotency store.

The first request with a key claims it, bound to its fingerprint (method, path, body bytes). Its 202 is
stored and replayed, with ``Idempotent-Replayed: true``, to every later request with the same key and the
same body, which publishes nothing. The same key with another body is 422 ``idempotency_conflict`` (as
Stripe does), for the whole retention; while the first request is still being handled, 409
``idempotency_in_progress``. Any other outcome (207, 409 unroutable, 503) stores no answer: a retry with
the same body is handled again, as without a store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from warren.api.ingest.errors import IDEMPOTENCY_CONFLICT, IDEMPOTENCY_IN_PROGRESS, STORE_UNAVAILABLE, ApiError
from warren.api.ingest.idempotency import Decision, IdempotencyStore, fingerprint

__all__ = ["REPLAYED_HEADER", "Idempotency"]

REPLAYED_HEADER = "Idempotent-Replayed"
_PURGE_EVERY = 60.0  # seconds between purges of expired keys, done in passing by a request

log = logging.getLogger("warren.api")


@dataclass
class Idempotency:
    """The store and its settings; ``stale_after`` is how long a claim may be held before it counts as dead."""

    store: IdempotencyStore
    retention: float
    stale_after: float
    retry_after: int
    _last_purge: float = 0.0

    async def once(
        self, request: web.Request, key: str, body: bytes, produce: Callable[[], Awaitable[web.Response]]
    ) -> web.Response:
        now = time.time()
        print_ = fingerprint(request.method, request.path, body)
        try:
            await self._purge(now)
            claim = await self.store.claim(key, print_, now, self.retention, now - self.stale_after)
        except Exception as exc:  # the database is down or refused: no answer is safe but "retry"
            log.warning("idempotency store failed on key %s: %s", key, exc)
            raise self._unavailable() from exc
        if claim.decision is Decision.CONFLICT:
            raise ApiError(
                422,
                IDEMPOTENCY_CONFLICT,
                "Idempotency-Key was already used with a different request (another body or path); "
                "use a new key for a new request",
            )
        if claim.decision is Decision.BUSY:
            raise ApiError(
                409,
                IDEMPOTENCY_IN_PROGRESS,
                "a request with this Idempotency-Key is still being handled; retry later",
                headers={"Retry-After": str(self.retry_after)},
            )
        if claim.decision is Decision.REPLAY:
            return web.Response(
                status=claim.status or 202,
                body=claim.body,
                content_type="application/json",
                headers={REPLAYED_HEADER: "true"},
            )
        return await self._run(key, produce)

    async def _run(self, key: str, produce: Callable[[], Awaitable[web.Response]]) -> web.Response:
        try:
            response = await produce()
        except BaseException:
            await self._release(key)
            raise
        if response.status == 202 and isinstance(response.body, bytes):
            try:
                await self.store.complete(key, response.status, response.body)
            except Exception as exc:  # stored in RabbitMQ all the same: answer 202, a retry publishes again
                log.warning("idempotency store could not record key %s: %s", key, exc)
        else:
            await self._release(key)
        return response

    async def _release(self, key: str) -> None:
        try:
            await self.store.release(key)
        except Exception as exc:  # the claim goes stale after stale_after and can be taken again then
            log.warning("idempotency store could not release key %s: %s", key, exc)

    async def _purge(self, now: float) -> None:
        if now - self._last_purge >= _PURGE_EVERY:
            self._last_purge = now
            await self.store.purge(now)

    def _unavailable(self) -> ApiError:
        return ApiError(
            503,
            STORE_UNAVAILABLE,
            "the idempotency store is unavailable; nothing was published, retry later",
            headers={"Retry-After": str(self.retry_after)},
        )
