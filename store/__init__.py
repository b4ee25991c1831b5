"""The endpoint store: tenants, endpoints and their signing secrets, in SQLite or PostgreSQL (docs/endpoints.md).

SQLAlchemy 2 (async) over aiosqlite or asyncpg, with Alembic migrations (``store/migrations``); signing secrets
are sealed with Fernet (``store/keys.py``). Workers never open it: they learn endpoints through RabbitMQ.
"""
