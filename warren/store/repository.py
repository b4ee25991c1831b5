"""Reading and writing the store: endpoints with their sealed secrets, tenants, and the file's endpoints.

A thin async shell over SQLAlchemy: each method is one transaction. Secrets go in sealed (``keys.py``) and
come out only through ``signing_secrets``, for a reveal or for signing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import InterfaceError as SAInterfaceError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from warren.core.errors import WarrenError
from warren.store.engine import StoreUnavailable, open_store_engine
from warren.store.keys import Sealer, sealer_from
from warren.store.records import (
    API,
    FILE,
    RevealedSecret,
    StoredEndpoint,
    StoredSecret,
    endpoint_options,
)
from warren.store.tables import EndpointRow, SecretRow, TenantRow
from warren.store.tenants import ensure_tenant
from warren.topology.config import Endpoint, StoreSettings
from warren.topology.endpoint_headers import resealed_json
from warren.topology.signing_keys import Ed25519Secret, signing_secret

__all__ = ["EndpointStore", "NameTaken", "Reconciled"]


class NameTaken(WarrenError):
    """An endpoint with this name exists already."""


@dataclass
class Reconciled:
    """What ``reconcile_file`` changed: names added, updated and removed as file-managed endpoints."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)  # in the file, but an API endpoint holds the name


def _stored(row: EndpointRow, secrets: Sequence[SecretRow] = ()) -> StoredEndpoint:
    return StoredEndpoint(
        name=row.name,
        tenant=row.tenant,
        url=row.url,
        events=tuple(row.events),
        options=dict(row.options),
        managed_by=row.managed_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        secrets=tuple(StoredSecret(s.id, s.created_at, s.expires_at, s.public_key) for s in secrets),
    )


class EndpointStore:
    """The store of one deployment (``store.url``)."""

    def __init__(
        self,
        engine: AsyncEngine,
        sealer: Sealer | None = None,
        clock: Callable[[], float] = time.time,
        *,
        keys: Sequence[str] = (),
    ) -> None:
        self.engine = engine
        self._given_sealer = sealer
        self._keys = tuple(keys)
        self._clock = clock
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    async def open(cls, settings: StoreSettings) -> EndpointStore:
        """The store of ``settings`` (which must name a url), migrated first when ``store.migrate`` is on."""
        return cls(await open_store_engine(settings), keys=settings.keys)

    async def close(self) -> None:
        await self.engine.dispose()

    @property
    def sealer(self) -> Sealer:
        """The store's keys (StoreKeyError when they are missing): they seal secrets and portal sessions."""
        return self._sealer

    @property
    def _sealer(self) -> Sealer:
        """The keys, resolved on first use: reconciling the file's endpoints (``warren setup``) needs none."""
        if self._given_sealer is None:
            self._given_sealer = sealer_from(self._keys)
        return self._given_sealer

    def _session(self) -> AsyncSession:
        return self._sessions()

    async def _secret_rows(self, session: AsyncSession, names: Sequence[str]) -> dict[str, list[SecretRow]]:
        found: dict[str, list[SecretRow]] = {name: [] for name in names}
        if names:
            rows = await session.scalars(
                select(SecretRow).where(SecretRow.endpoint.in_(names)).order_by(SecretRow.id.desc())
            )
            for row in rows:
                found[row.endpoint].append(row)
        return found

    async def _ensure_tenant(self, session: AsyncSession, tenant: str | None) -> None:
        await ensure_tenant(session, tenant, self._clock())

    async def get(self, name: str) -> StoredEndpoint | None:
        async with self._session() as session:
            row = await session.get(EndpointRow, name)
            if row is None:
                return None
            return _stored(row, (await self._secret_rows(session, [name]))[name])

    async def list_endpoints(
        self,
        *,
        tenant: str | None = None,
        managed_by: str | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> list[StoredEndpoint]:
        """Endpoints in name order, from after ``after`` (the cursor of a page), at most ``limit``."""
        query = select(EndpointRow).order_by(EndpointRow.name)
        if tenant is not None:
            query = query.where(EndpointRow.tenant == tenant)
        if managed_by is not None:
            query = query.where(EndpointRow.managed_by == managed_by)
        if after is not None:
            query = query.where(EndpointRow.name > after)
        if limit is not None:
            query = query.limit(limit)
        async with self._session() as session:
            rows = list(await session.scalars(query))
            secrets = await self._secret_rows(session, [r.name for r in rows])
            return [_stored(row, secrets[row.name]) for row in rows]

    async def tenants(self) -> list[str]:
        async with self._session() as session:
            return list(await session.scalars(select(TenantRow.name).order_by(TenantRow.name)))

    async def create(
        self, endpoint: Endpoint, *, tenant: str | None, secret: str | Sequence[str] | None, managed_by: str = API
    ) -> StoredEndpoint:
        """Store a new endpoint (``secret`` sealed: one, or an HMAC secret and an Ed25519 key; None for a
        file-managed one, whose secret stays in the file)."""
        now = self._clock()
        row = EndpointRow(
            name=endpoint.name,
            tenant=tenant,
            url=endpoint.url,
            events=list(endpoint.events),
            options=endpoint_options(endpoint, self._sealer.seal if managed_by == API else None),
            managed_by=managed_by,
            created_at=now,
            updated_at=now,
            version=1,
        )
        try:
            async with self._session() as session, session.begin():
                await self._ensure_tenant(session, tenant)
                if await session.get(EndpointRow, endpoint.name) is not None:
                    raise NameTaken(f"endpoint {endpoint.name!r} exists already")
                session.add(row)
                await session.flush()
                texts = [secret] if isinstance(secret, str) else list(secret or ())
                secrets = [self._secret_row(endpoint.name, text, now) for text in reversed(texts)]  # newest first
                session.add_all(secrets)
                await session.flush()
                return _stored(row, secrets[::-1])
        except IntegrityError:
            raise NameTaken(f"endpoint {endpoint.name!r} exists already") from None

    def _secret_row(self, name: str, text: str, now: float) -> SecretRow:
        """``text`` sealed, with its public key when it is an Ed25519 key (the key's text is checked here too)."""
        key = signing_secret(text)
        public = key.public_key() if isinstance(key, Ed25519Secret) else None
        return SecretRow(endpoint=name, sealed=self._sealer.seal(text), created_at=now, public_key=public)

    async def update(self, endpoint: Endpoint, *, tenant: str | None) -> StoredEndpoint | None:
        """Replace the stored fields of ``endpoint.name`` (its secrets stay); None when there is no such endpoint."""
        async with self._session() as session, session.begin():
            row = await session.get(EndpointRow, endpoint.name)
            if row is None:
                return None
            await self._ensure_tenant(session, tenant)
            row.tenant = tenant
            row.url = endpoint.url
            row.events = list(endpoint.events)
            row.options = endpoint_options(endpoint, self._sealer.seal)
            row.updated_at = self._clock()
            row.version += 1
            await session.flush()
            return _stored(row, (await self._secret_rows(session, [row.name]))[row.name])

    async def delete(self, name: str) -> bool:
        async with self._session() as session, session.begin():
            await session.execute(delete(SecretRow).where(SecretRow.endpoint == name))
            result = await session.execute(delete(EndpointRow).where(EndpointRow.name == name))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def signing_secrets(self, name: str, *, now: float | None = None) -> list[RevealedSecret]:
        """The endpoint's secrets that still sign, newest first (an explicit reveal, or for signing)."""
        moment = self._clock() if now is None else now
        async with self._session() as session:
            rows = (await self._secret_rows(session, [name]))[name]
        return [
            RevealedSecret(self._sealer.open(r.sealed), r.created_at, r.expires_at)
            for r in rows
            if r.expires_at is None or r.expires_at > moment
        ]

    async def rotate(self, name: str, secret: str, *, grace: float, now: float | None = None) -> StoredEndpoint | None:
        """``secret`` becomes the endpoint's newest of its scheme; the ones of that scheme before it keep signing for
        ``grace`` seconds more (an HMAC rotation leaves the Ed25519 keys as they are, and the other way round).

        A secret already due to expire keeps its earlier expiry. ``now`` is the rotation's moment (the clock's by
        default): the ends the workers were told. None when there is no such endpoint.
        """
        now = self._clock() if now is None else now
        async with self._session() as session, session.begin():
            row = await session.get(EndpointRow, name)
            if row is None:
                return None
            new = self._secret_row(name, secret, now)
            same_scheme = (
                SecretRow.public_key.is_(None) if new.public_key is None else SecretRow.public_key.is_not(None)
            )
            await session.execute(
                update(SecretRow)
                .where(SecretRow.endpoint == name, SecretRow.expires_at.is_(None), same_scheme)
                .values(expires_at=now + grace)
            )
            await session.execute(delete(SecretRow).where(SecretRow.endpoint == name, SecretRow.expires_at <= now))
            session.add(new)
            row.updated_at = now
            row.version += 1
            await session.flush()
            return _stored(row, (await self._secret_rows(session, [name]))[name])

    async def expired(self, *, now: float | None = None) -> list[str]:
        """Endpoints holding a secret whose grace period is over (their workers still sign with it)."""
        moment = self._clock() if now is None else now
        async with self._session() as session:
            names = await session.scalars(select(SecretRow.endpoint).where(SecretRow.expires_at <= moment).distinct())
            return sorted(names)

    async def drop_expired(self, name: str, *, now: float | None = None) -> int:
        moment = self._clock() if now is None else now
        async with self._session() as session, session.begin():
            result = await session.execute(
                delete(SecretRow).where(SecretRow.endpoint == name, SecretRow.expires_at <= moment)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def rekey(self) -> int:
        """Seal every secret again with the first of ``store.keys`` (after a key rotation): the signing secrets
        and the secret header values; how many."""
        async with self._session() as session, session.begin():
            rows = list(await session.scalars(select(SecretRow)))
            for row in rows:
                row.sealed = self._sealer.reseal(row.sealed)
            headers = 0
            for endpoint in await session.scalars(select(EndpointRow).where(EndpointRow.managed_by == API)):
                options, count = resealed_json(endpoint.options, self._sealer.reseal)
                if count:
                    endpoint.options = options
                    headers += count
            return len(rows) + headers

    async def reconcile_file(self, endpoints: Sequence[Endpoint]) -> Reconciled:
        """Make the file-managed endpoints exactly the file's: add, update, remove; API endpoints are left alone.

        A file endpoint whose name an API endpoint holds is reported in ``taken`` and not stored.
        """
        outcome = Reconciled()
        now = self._clock()
        wanted = {e.name: e for e in endpoints}
        async with self._session() as session, session.begin():
            rows = {r.name: r for r in await session.scalars(select(EndpointRow))}
            for name, row in rows.items():
                if row.managed_by == FILE and name not in wanted:
                    await session.execute(delete(SecretRow).where(SecretRow.endpoint == name))
                    await session.delete(row)
                    outcome.removed.append(name)
            for name, endpoint in wanted.items():
                tenant = getattr(endpoint, "tenant", None)
                await self._ensure_tenant(session, tenant)
                existing = rows.get(name)
                fields = {
                    "tenant": tenant,
                    "url": endpoint.url,
                    "events": list(endpoint.events),
                    "options": endpoint_options(endpoint),
                }
                if existing is None:
                    session.add(
                        EndpointRow(name=name, managed_by=FILE, created_at=now, updated_at=now, version=1, **fields)
                    )
                    outcome.added.append(name)
                elif existing.managed_by != FILE:
                    outcome.taken.append(name)
                elif any(getattr(existing, k) != v for k, v in fields.items()):
                    for key, value in fields.items():
                        setattr(existing, key, value)
                    existing.updated_at = now
                    existing.version += 1
                    outcome.updated.append(name)
        return outcome


# Errors of the database driver that mean "unreachable", for the API's 503.
UNREACHABLE = (OSError, OperationalError, SAInterfaceError, StoreUnavailable)
