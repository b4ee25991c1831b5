"""The one redaction of credentials in URLs."""

from __future__ import annotations

import pytest

from warren.core.redact import redact_url, redact_urls


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pa55@example.com/hook", "https://***@example.com/hook"),
        ("https://tok3n@example.com:8443/h", "https://***@example.com:8443/h"),
        ("https://example.com/h?token=s3cret&x=1", "https://example.com/h?token=***&x=***"),
        ("https://example.com/h?s3cret#frag", "https://example.com/h?***#frag"),
        ("https://u:p@example.com/?a=1&b=", "https://***@example.com/?a=***&b=***"),
        ("amqp://guest:guest@127.0.0.1:5672/%2F", "amqp://***@127.0.0.1:5672/%2F"),
        ("https://example.com/plain/path", "https://example.com/plain/path"),
        ("http://u:p@[::1/?token=s3cret", "http://***@[::1/?token=***"),  # not even a valid URL
        ("not a url", "not a url"),
    ],
)
def test_userinfo_and_query_values_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_urls_inside_error_texts_are_redacted() -> None:
    # As aiohttp words them: the URL quoted at the end of the message, or bare after a colon
    text = "ClientResponseError: 400, message='Bad status line', url='http://127.0.0.1:1/x?token=s3cret'"
    assert (
        redact_urls(text) == "ClientResponseError: 400, message='Bad status line', url='http://127.0.0.1:1/x?token=***'"
    )
    assert redact_urls("refused: invalid URL http://u:pa55@[::1/?k=v") == "refused: invalid URL http://***@[::1/?k=***"
