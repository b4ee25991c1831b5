"""Tenants, endpoints and their sealed signing secrets.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "warren_tenants",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "warren_endpoints",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("tenant", sa.String(63), sa.ForeignKey("warren_tenants.name"), nullable=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("managed_by", sa.String(8), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_warren_endpoints_tenant", "warren_endpoints", ["tenant"])
    op.create_index("ix_warren_endpoints_managed_by", "warren_endpoints", ["managed_by"])
    op.create_table(
        "warren_endpoint_secrets",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "endpoint", sa.String(63), sa.ForeignKey("warren_endpoints.name", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_warren_endpoint_secrets_endpoint", "warren_endpoint_secrets", ["endpoint"])


def downgrade() -> None:
    op.drop_table("warren_endpoint_secrets")
    op.drop_table("warren_endpoints")
    op.drop_table("warren_tenants")
