"""AMQP header values that aio-pika will not write but other clients can: a long string that is not UTF-8."""

from __future__ import annotations

__all__ = ["NotUtf8"]


class NotUtf8(str):
    """A header value pamqp writes as a long string of exactly ``raw`` (it encodes a ``str`` with ``.encode``).

    pamqp reads such a string back as ``bytes``, as it does one from any client that sends bytes which are not
    UTF-8."""

    raw: bytes

    def __new__(cls, raw: bytes) -> NotUtf8:
        made = super().__new__(cls, raw.decode("latin-1"))
        made.raw = raw
        return made

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw
