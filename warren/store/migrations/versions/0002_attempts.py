"""The attempt log: one row per delivery attempt, keyed by the record's id.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "warren_attempts",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("tenant", sa.String(), nullable=True),
        sa.Column("endpoint", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("next_delay_s", sa.Float(), nullable=True),
        sa.Column("worker", sa.String(), nullable=False),
    )
    op.create_index("ix_warren_attempts_event", "warren_attempts", ["event_id", "attempt", "at"])
    op.create_index("ix_warren_attempts_endpoint", "warren_attempts", ["endpoint", "at"])
    op.create_index("ix_warren_attempts_tenant", "warren_attempts", ["tenant", "at"])
    op.create_index("ix_warren_attempts_at", "warren_attempts", ["at"])


def downgrade() -> None:
    op.drop_table("warren_attempts")
