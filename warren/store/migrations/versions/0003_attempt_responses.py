"""The attempt log keeps the start of each answer and its content-type and retry-after headers.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable, without a default: the rows stored before keep null (no answer recorded), and adding them is
    # a change of the catalogue only, on SQLite and PostgreSQL alike (no table rewrite).
    with op.batch_alter_table("warren_attempts") as batch:
        batch.add_column(sa.Column("response", sa.Text(), nullable=True))
        batch.add_column(sa.Column("response_headers", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("warren_attempts") as batch:
        batch.drop_column("response_headers")
        batch.drop_column("response")
