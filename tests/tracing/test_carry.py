"""What trace context a message carries on, and what the environment asks of the SDK. Pure."""

from __future__ import annotations

import pytest

from warren.tracing import active_tracer
from warren.tracing.carry import carried, environment_context, outgoing_headers
from warren.tracing.sdk import configure, exporter_names

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"traceparent": PARENT}, (PARENT, None)),
        ({"traceparent": PARENT.encode(), "tracestate": b"a=1,b=2"}, (PARENT, "a=1,b=2")),
        ({"traceparent": PARENT + "-future"}, (PARENT + "-future", None)),  # a later version may add fields
        ({"traceparent": PARENT, "tracestate": "x" * 513}, (PARENT, None)),  # too long: the state is dropped
        ({"traceparent": PARENT, "tracestate": "a=1\r\nx: y"}, (PARENT, None)),  # a header injection attempt
        ({"traceparent": PARENT, "tracestate": ""}, (PARENT, None)),
        ({"traceparent": PARENT.upper()}, None),
        ({"traceparent": PARENT + "\n"}, None),
        ({"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"}, None),
        ({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-" + "0" * 16 + "-01"}, None),
        ({"traceparent": "ff" + PARENT[2:]}, None),
        ({"traceparent": b"\xff\xfe"}, None),
        ({"traceparent": 7}, None),
        ({"tracestate": "a=1"}, None),
        ({}, None),
    ],
)
def test_only_a_well_formed_traceparent_is_carried(headers: dict[str, object], expected: object) -> None:
    assert carried(headers) == expected


def test_with_tracing_off_the_carried_context_goes_out_as_it_is() -> None:
    headers = {"webhook-id": "e1"}
    outgoing_headers(headers, (PARENT, "a=1"))
    assert headers == {"webhook-id": "e1", "traceparent": PARENT, "tracestate": "a=1"}
    bare = {"webhook-id": "e1"}
    outgoing_headers(bare, None)
    assert bare == {"webhook-id": "e1"}


def test_the_environment_carrier() -> None:
    assert environment_context({"TRACEPARENT": PARENT, "TRACESTATE": "k=v"}) == (PARENT, "k=v")
    assert environment_context({"TRACEPARENT": "junk"}) is None
    assert environment_context({}) is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),  # the extra installed is not enough
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "Console, otlp"}, ["console", "otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, []),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, ["otlp"]),
    ],
)
def test_the_sdk_is_set_up_only_when_an_exporter_is_asked_for(env: dict[str, str], expected: list[str]) -> None:
    assert exporter_names(env) == expected


def test_configure_sets_nothing_up_unless_an_exporter_it_knows_is_asked_for(caplog: pytest.LogCaptureFixture) -> None:
    assert configure("warren-test", {}) is None
    assert configure("warren-test", {"OTEL_TRACES_EXPORTER": "zipkin"}) is None
    assert "zipkin" in caplog.text
    assert active_tracer() is None  # no global provider was set, nor a tracer chosen
