"""Tenant-scoped API keys: one tenant's credential for the admin and ingest APIs, kept as a digest.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "warren_api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(63), sa.ForeignKey("warren_tenants.name"), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_warren_api_keys_tenant", "warren_api_keys", ["tenant"])


def downgrade() -> None:
    op.drop_table("warren_api_keys")
