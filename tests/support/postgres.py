"""The PostgreSQL a test run uses: $WARREN_TEST_POSTGRES_DSN, else the local default; a schema per test."""

from __future__ import annotations

import os
import uuid

POSTGRES_ENV = "WARREN_TEST_POSTGRES_DSN"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_dsn() -> str:
    return os.environ.get(POSTGRES_ENV, DEFAULT_DSN)


def fresh_schema_name() -> str:
    return f"warren_test_{uuid.uuid4().hex[:12]}"
