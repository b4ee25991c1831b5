"""The ingest idempotency store in PostgreSQL (asyncpg): for several ``warren api`` processes.

A claim is one transaction: insert the key if it is new, else lock its row (``FOR UPDATE``), so two
processes given the same key at the same instant are serialised and exactly one of them claims it.
"""

from __future__ import annotations

import asyncpg

from warren.api.ingest.idempotency.base import TABLE, Claim, Decision, Row, decide

__all__ = ["PostgresIdempotencyStore"]

_COLUMNS = "fingerprint, state, status, body, claimed_at, expires_at"


class PostgresIdempotencyStore:
    def __init__(self, dsn: str, *, max_size: int = 10) -> None:
        self._dsn = dsn
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self._max_size)
        async with self._pool.acquire() as conn:
            await conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {TABLE} (
                    key TEXT PRIMARY KEY,
                    fingerprint TEXT NOT NULL,
                    state TEXT NOT NULL,
                    status INTEGER,
                    body BYTEA,
                    claimed_at DOUBLE PRECISION NOT NULL,
                    expires_at DOUBLE PRECISION NOT NULL
                )"""
            )
            await conn.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_expiry ON {TABLE} (expires_at)")

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _the_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise asyncpg.InterfaceError("the idempotency store is not open")
        return self._pool

    async def claim(self, key: str, print_: str, now: float, retention: float, stale_before: float) -> Claim:
        async with self._the_pool().acquire() as conn, conn.transaction():
            inserted = await conn.fetchval(
                f"INSERT INTO {TABLE} (key, {_COLUMNS}) VALUES ($1, $2, 'busy', NULL, NULL, $3, $4) "
                "ON CONFLICT (key) DO NOTHING RETURNING true",
                key,
                print_,
                now,
                now + retention,
            )
            if inserted:
                return Claim(Decision.CLAIM)
            found = await conn.fetchrow(f"SELECT {_COLUMNS} FROM {TABLE} WHERE key = $1 FOR UPDATE", key)
            claim = decide(Row(*found) if found else None, print_, now, stale_before)
            if claim.decision is Decision.CLAIM:
                await conn.execute(
                    f"UPDATE {TABLE} SET fingerprint = $2, state = 'busy', status = NULL, body = NULL, "
                    "claimed_at = $3, expires_at = $4 WHERE key = $1",
                    key,
                    print_,
                    now,
                    now + retention,
                )
            return claim

    async def complete(self, key: str, status: int, body: bytes) -> None:
        await self._the_pool().execute(
            f"UPDATE {TABLE} SET state = 'done', status = $2, body = $3 WHERE key = $1", key, status, body
        )

    async def release(self, key: str) -> None:
        await self._the_pool().execute(f"UPDATE {TABLE} SET state = 'open' WHERE key = $1 AND state = 'busy'", key)

    async def purge(self, now: float) -> int:
        result = await self._the_pool().execute(f"DELETE FROM {TABLE} WHERE expires_at <= $1", now)
        return int(result.split()[-1])
