"""Warren's one SQL layer, in SQLite or PostgreSQL: tenants, endpoints and their signing secrets, the attempt log;
the ingest API's Idempotency-Keys (``idempotency``); the receiving toolkit's processed messages (``dedup``).

SQLAlchemy 2 (async) over aiosqlite or asyncpg, with Alembic migrations (``migrations``, three lines, each with
its own version table: ``engine``); signing secrets are sealed with Fernet (``keys``). The receiving toolkit's
PostgreSQL store keeps a plain asyncpg path (``dedup_asyncpg``), measured in bench/README.md. Workers never
open the store: they learn endpoints through RabbitMQ.
"""
