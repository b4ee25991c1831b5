"""Deeply nested JSON documents, for the entry points that must refuse (or take) them without a crash.

orjson reads 1,024 levels and writes 254; the standard library's parser raises RecursionError at about 1,000
(fewer inside a deep call stack); pydantic reads 200.
"""

from __future__ import annotations

__all__ = ["BEYOND_ORJSON", "nested", "with_duplicate"]


def nested(depth: int, inner: bytes = b"1") -> bytes:
    """``inner`` inside ``depth`` arrays."""
    return b"[" * depth + inner + b"]" * depth


BEYOND_ORJSON = nested(200_000)  # what the adversarial run sent: a 500 with a traceback, not a 400


def with_duplicate(document: bytes, key: str = "id") -> bytes:
    """``document`` (an object) with its first key ``key`` repeated at its end."""
    assert document.endswith(b"}")
    return document[:-1] + b', "' + key.encode() + b'": "again"}'
