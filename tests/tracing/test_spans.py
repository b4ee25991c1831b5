"""The attempt span's attributes: a URL's secrets hidden, the error type of each failure. Pure (the SDK in memory)."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode

from tests.support.tracing import Spans
from warren.tracing.spans import AttemptFacts, end_attempt_span, start_attempt_span

PARENT = ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None)


def attempt(spans: Spans, url: str, facts: AttemptFacts) -> dict[str, object]:
    span = start_attempt_span(
        spans.provider.get_tracer("t"), endpoint="shop", url=url, event_id="e1", event_type="a.b", attempt=3,
        tenant="acme", trace_context=PARENT,
    )  # fmt: skip
    end_attempt_span(span, facts)
    [done] = spans.finished()
    assert done.parent is not None and f"{done.parent.span_id:016x}" == "b7ad6b7169203331"
    return {**(done.attributes or {}), "status": done.status.status_code}


def test_the_url_keeps_no_credentials_nor_query_values() -> None:
    spans = Spans()
    found = attempt(
        spans, "https://user:pw@hooks.example/in?token=s3cret&x", AttemptFacts("delivered", 200, None, "", True)
    )
    assert found["url.full"] == "https://***@hooks.example/in?token=***&***"
    assert (found["server.address"], found["server.port"], found["url.scheme"]) == ("hooks.example", 443, "https")
    assert found["warren.tenant"] == "acme" and found["warren.attempt"] == 3
    assert "error.type" not in found and found["status"] is StatusCode.UNSET


@pytest.mark.parametrize(
    ("facts", "error_type"),
    [
        (AttemptFacts("retry", 503, None, "HTTP 503", False, next_delay=1.5), "503"),
        (AttemptFacts("retry", None, "timed out after 5s", "timed out after 5s", False), "timeout"),
        (AttemptFacts("retry", None, "connection failed: refused", "connection failed", False), "connection_failed"),
        (AttemptFacts("dead", None, "refused: private address", "refused", False, refused=True), "refused"),
        (AttemptFacts("retry", None, "ValueError: bad header", "ValueError", False), "_OTHER"),
    ],
)
def test_a_failed_attempt_is_an_error_with_its_type(facts: AttemptFacts, error_type: str) -> None:
    found = attempt(Spans(), "http://127.0.0.1:8080/hook", facts)
    assert found["error.type"] == error_type and found["status"] is StatusCode.ERROR
    assert found["warren.outcome"] == facts.outcome
    assert ("http.response.status_code" in found) == (facts.status is not None)
