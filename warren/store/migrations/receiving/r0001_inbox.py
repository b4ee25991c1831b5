"""The receiving toolkit's processed messages and per-key sequences, in the schema the store names (PostgreSQL),
adopted as they are when a release before the migrations already created them (the same columns and index).

Revision ID: r0001
Revises:
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "r0001"
down_revision = None
branch_labels = None
depends_on = None

SEEN = "warren_inbox_seen"
SEQUENCES = "warren_inbox_sequences"


def upgrade() -> None:
    schema = context.config.attributes.get("schema")
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(SEEN, schema=schema):
        op.create_table(
            SEEN,
            sa.Column("scope", sa.Text(), primary_key=True),
            sa.Column("event_id", sa.Text(), primary_key=True),
            sa.Column("outcome", sa.Text(), nullable=False),
            sa.Column("seen_at", sa.Float(), nullable=False),
            sa.Column("expires_at", sa.Float(), nullable=False),
            schema=schema,
        )
        op.create_index(f"{SEEN}_expiry", SEEN, ["expires_at"], schema=schema)
    if not inspector.has_table(SEQUENCES, schema=schema):
        op.create_table(
            SEQUENCES,
            sa.Column("scope", sa.Text(), primary_key=True),
            sa.Column("key", sa.Text(), primary_key=True),
            sa.Column("last_seq", sa.BigInteger(), nullable=True),  # NULL: a row made only to be locked
            sa.Column("updated_at", sa.Float(), nullable=False),
            schema=schema,
        )


def downgrade() -> None:
    schema = context.config.attributes.get("schema")
    op.drop_table(SEQUENCES, schema=schema)
    op.drop_table(SEEN, schema=schema)
