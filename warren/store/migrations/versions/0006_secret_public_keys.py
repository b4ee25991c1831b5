"""An endpoint secret's Ed25519 public key (``whpk_``), beside the sealed ``whsk_`` key; null for an HMAC secret.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("warren_endpoint_secrets") as batch:
        batch.add_column(sa.Column("public_key", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("warren_endpoint_secrets") as batch:
        batch.drop_column("public_key")
