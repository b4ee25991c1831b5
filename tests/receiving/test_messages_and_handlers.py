"""The inbound wire format (encode/decode, kept headers) and loading ``module:function`` handlers."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest

from warren.broker import wire
from warren.receiving.errors import HandlerError
from warren.receiving.handlers import load_handler
from warren.receiving.identity import Identity
from warren.receiving.messages import decode_inbound, encode_inbound, kept_headers


def test_kept_headers_drop_credentials_connection_headers_and_secret_headers() -> None:
    items = [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer x"),
        ("Cookie", "a=b"),
        ("Content-Length", "10"),
        ("X-Telegram-Bot-Api-Secret-Token", "tok"),
        ("X-Tag", "a"),
        ("x-tag", "b"),
    ]
    kept = kept_headers(items, ["X-Telegram-Bot-Api-Secret-Token"])
    assert kept == {"content-type": "application/json", "x-tag": "a, b"}


def _incoming(message: Any) -> Mock:
    """What a consumer would receive for a published message (the fields decode reads)."""
    return Mock(
        body=message.body,
        headers=message.headers,
        message_id=message.message_id,
        content_type=message.content_type,
    )


def test_encode_then_decode_gives_the_handler_the_request_back() -> None:
    message = encode_inbound(
        "shop", Identity("e1", "o-1", 3), b'{"a": 1}', {"x-id": "e1"}, "application/json", received_ms=1_700_000_000_000
    )
    assert message.message_id == "e1"
    event = decode_inbound(_incoming(message), "shop")
    assert (event.source, event.id, event.key, event.sequence, event.attempt) == ("shop", "e1", "o-1", 3, 0)
    assert event.headers == {"x-id": "e1"}
    assert event.json() == {"a": 1}
    assert event.received_at.timestamp() == 1_700_000_000


def test_decode_counts_attempts_and_a_replay_resets_them() -> None:
    message = encode_inbound("shop", Identity("e1"), b"", {}, None)
    headers = dict(message.headers)
    retried = Mock(body=b"", headers={**headers, wire.H_ATTEMPT: 2}, message_id="e1", content_type=None)
    assert decode_inbound(retried, "shop").attempt == 2
    replayed = Mock(
        body=b"", headers={**headers, wire.H_ATTEMPT: 5, wire.H_REPLAYED: True}, message_id="e1", content_type=None
    )
    assert decode_inbound(replayed, "shop").attempt == 0


def test_load_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_handler("tests.support.inbox_handlers:record").__name__ == "record"
    with pytest.raises(HandlerError, match=r"no module named 'no_such_module_abc' on the import path .*PYTHONPATH"):
        load_handler("no_such_module_abc:f")
    with pytest.raises(HandlerError, match=r"no module named 'nope' in the package tests\.support \(/"):
        load_handler("tests.support.nope:f")
    # A module that is found but imports one that is missing says so as it is: the fix is not the path
    (tmp_path / "handler_with_a_missing_dependency.py").write_text("import no_such_dependency_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HandlerError, match="cannot import handler_with_a_missing_dependency: No module named 'no_such"):
        load_handler("handler_with_a_missing_dependency:f")
    with pytest.raises(HandlerError, match="no attribute 'nope'"):
        load_handler("tests.support.inbox_handlers:nope")
    with pytest.raises(HandlerError, match="not callable"):
        load_handler("tests.support.inbox_handlers:CALLS")
    with pytest.raises(HandlerError, match="not 'module:function'"):
        load_handler("justamodule")
