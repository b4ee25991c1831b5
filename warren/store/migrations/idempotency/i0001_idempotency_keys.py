"""The ingest API's Idempotency-Keys (``api.idempotency_store``), adopted as they are when a release before the
migrations already created the table (the same columns and index).

Revision ID: i0001
Revises:
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "i0001"
down_revision = None
branch_labels = None
depends_on = None

TABLE = "warren_api_idempotency"


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(TABLE):
        return  # made by the release before migrations, with this very schema
    op.create_table(
        TABLE,
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("claimed_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
    )
    op.create_index(f"{TABLE}_expiry", TABLE, ["expires_at"])


def downgrade() -> None:
    op.drop_table(TABLE)
