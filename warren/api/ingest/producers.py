"""Who may publish: a producer token (``api.tokens``: events of any tenant) or a tenant's API key (its own
tenant's events only; warren/store/api_keys.py). Keys are looked up through ``tenant_keys``, which the admin
API sets when it runs: without a store there are no keys, and only producer tokens are accepted.

An event sent with a tenant's key names that tenant or none (it is then the key's tenant's); naming another
tenant refuses the whole request with 403, and nothing is published. Idempotency keys are the tenant's own:
two tenants sending the same ``Idempotency-Key`` never replay each other's answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from aiohttp import web

from warren.api.ingest.auth import bearer_token, challenge, token_matches
from warren.api.ingest.errors import ApiError, FieldProblem
from warren.api.ingest.schemas import EventIn

__all__ = ["CALLER_TENANT", "FORBIDDEN", "PRODUCERS", "Producers", "TenantKeys", "confine", "scoped_key"]

FORBIDDEN = "forbidden"
# A key's tenant, or None for anything that is not an active key (warren/api/admin/requests.py makes one).
TenantKeys = Callable[[str], Awaitable[str | None]]
# The tenant whose key makes the request being handled (None: a producer token), set by the auth middleware
# around its handler: aiohttp's typed request storage (RequestKey) needs aiohttp 3.14.
CALLER_TENANT: ContextVar[str | None] = ContextVar("warren_ingest_tenant", default=None)


@dataclass
class Producers:
    tokens: tuple[bytes, ...]
    tenant_keys: TenantKeys | None = None

    async def check(self, request: web.Request) -> str | None:
        """The tenant of the request's key, None for a producer token; 401 for anything else."""
        given = bearer_token(request.headers.get("Authorization"))
        if given is None:
            raise challenge(None)
        if token_matches(given, self.tokens):
            return None
        tenant = await self.tenant_keys(given) if self.tenant_keys is not None else None
        if tenant is None:
            raise challenge(given)
        return tenant


PRODUCERS = web.AppKey("producers", Producers)


def confine(items: Sequence[EventIn], tenant: str | None, *, batch: bool) -> list[EventIn]:
    """The events as a caller of ``tenant`` may publish them: each of that tenant (one naming none becomes its),
    or a 403 naming every event of another tenant. A producer token (``tenant`` None) publishes as given."""
    if tenant is None:
        return list(items)
    others = [i for i, item in enumerate(items) if item.tenant not in (None, tenant)]
    if others:
        problems = [
            FieldProblem(f"events[{i}].tenant" if batch else "tenant", f"not {tenant!r}, the key's tenant")
            for i in others
        ]
        raise ApiError(
            403, FORBIDDEN, f"a key of tenant {tenant!r} publishes that tenant's events only", fields=problems[:20]
        )
    return [item if item.tenant == tenant else item.model_copy(update={"tenant": tenant}) for item in items]


def scoped_key(key: str, tenant: str | None) -> str:
    """An Idempotency-Key as stored: a tenant's key is kept apart from every other tenant's and producers'."""
    return key if tenant is None else f"tenant:{tenant}:{key}"
