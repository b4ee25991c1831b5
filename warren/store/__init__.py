"""Warren's one SQL layer: tenants, endpoints and their signing secrets, the attempt log, in SQLite or PostgreSQL.

SQLAlchemy 2 (async) over aiosqlite or asyncpg, with Alembic migrations (``migrations``); signing secrets are
sealed with Fernet (``keys``). Workers never open it: they learn endpoints through RabbitMQ.
"""
