"""The receiving toolkit moved to ``warren.receiving``; its earlier path, ``warren.consumers.receiving``, keeps
working as users wrote it (docs of earlier releases show both the package and its submodules)."""

from __future__ import annotations

import subprocess
import sys


def test_the_earlier_path_gives_the_same_objects_as_the_new_one() -> None:
    # In a fresh interpreter, so that neither path was imported before (the order must not matter)
    program = """
from warren.consumers.receiving.stores.sqlite import SqliteStore
from warren.consumers.receiving.errors import VerificationError
from warren.consumers.receiving import IdempotentConsumer, __all__ as old_all
import warren.receiving as new
import warren.receiving.errors, warren.receiving.stores.sqlite
assert SqliteStore is warren.receiving.stores.sqlite.SqliteStore
assert VerificationError is warren.receiving.errors.VerificationError
assert IdempotentConsumer is new.IdempotentConsumer
assert sorted(old_all) == sorted(new.__all__)
print("same")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr
