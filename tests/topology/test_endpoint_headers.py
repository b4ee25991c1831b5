"""Per-endpoint headers (warren/topology/endpoint_headers.py) and egress proxy settings (proxies.py): validation,
hiding and sealing. Pure."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.conftest import TEST_SECRET
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.endpoint_headers import (
    MAX_BYTES,
    MAX_HEADERS,
    hidden_json,
    opened_json,
    parse_header_line,
    sealed_json,
)
from warren.topology.proxies import chosen_proxy, shown_proxy

pytestmark = pytest.mark.timeout(10)


def endpoint(headers: Any = None, **fields: Any) -> Endpoint:
    data: dict[str, Any] = {"name": "e", "url": "https://hooks.example.com/", "secret": TEST_SECRET, "events": ["#"]}
    if headers is not None:
        data["headers"] = headers
    return Endpoint.model_validate({**data, **fields})


def refusal(headers: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        endpoint(headers)
    return str(caught.value)


def test_headers_are_sent_in_the_order_given_and_secret_ones_resolve_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_TOKEN", "Bearer s3cr3t")
    e = endpoint({"X-Team": "billing", "Authorization": {"value": "env:PARTNER_TOKEN", "secret": True}})
    assert e.headers.outgoing() == {"X-Team": "billing", "Authorization": "Bearer s3cr3t"}
    assert [h.secret for h in e.headers] == [False, True]


@pytest.mark.parametrize(
    "name",
    [
        *("Connection", "keep-alive", "Transfer-Encoding", "TE", "trailer", "Upgrade", "Host", "Content-Length"),
        *("Proxy-Authorization", "proxy-connection", "Content-Type", "webhook-id", "Webhook-Signature", "webhook-x"),
        *("traceparent", "TraceState"),
    ],
)
def test_hop_by_hop_framing_proxy_and_warrens_own_headers_are_refused(name: str) -> None:
    assert f"header {name!r} cannot be set on an endpoint" in refusal({name: "x"})


@pytest.mark.parametrize("name", ["X Team", "X-Team:", "", "Ünicode", "a" * 257, "(x)", "x@y"])
def test_a_name_that_is_not_an_http_token_is_refused(name: str) -> None:
    assert "is not an HTTP token" in refusal({name: "x"})


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\x00b", "a\x7fb", "\x1b[31m"])
def test_a_value_with_a_control_character_is_refused(value: str) -> None:
    assert "holds a control character" in refusal({"X-A": value})
    assert "holds a control character" in refusal({"X-A": {"value": value, "secret": True}})


def test_a_tab_and_non_ascii_text_are_values() -> None:
    assert endpoint({"X-A": "a\tb", "X-B": "café"}).headers.outgoing() == {"X-A": "a\tb", "X-B": "café"}


def test_names_are_case_insensitive_so_one_header_twice_is_refused() -> None:
    assert "is given twice" in refusal({"X-Team": "a", "x-team": "b"})


def test_the_count_and_the_total_size_are_bounded() -> None:
    assert endpoint({f"X-{i}": "v" for i in range(MAX_HEADERS)})
    assert f"at most {MAX_HEADERS} headers" in refusal({f"X-{i}": "v" for i in range(MAX_HEADERS + 1)})
    assert f"at most {MAX_BYTES} in all" in refusal({"X-A": "v" * 5000, "X-B": "v" * 5000})


@pytest.mark.parametrize(
    "given",
    [["X-A", "b"], {"X-A": 1}, {"X-A": {"value": "v", "secret": "yes"}}, {"X-A": {"value": "v", "hidden": True}}],
)
def test_malformed_tables_are_refused_with_the_form_expected(given: Any) -> None:
    text = refusal(given)
    assert "headers is a table" in text or "a table { value = '...', secret = true }" in text


def test_a_secret_value_never_shows_in_repr_and_a_json_dump_reloads() -> None:
    e = endpoint({"X-Team": "billing", "Authorization": {"value": "Bearer s3cr3t", "secret": True}})
    assert "s3cr3t" not in repr(e) and "s3cr3t" not in str(e.headers) and "billing" in repr(e)
    dumped = e.model_dump(mode="json")
    assert dumped["headers"]["Authorization"] == {"value": "Bearer s3cr3t", "secret": True}
    assert Endpoint.model_validate(dumped) == e
    assert Endpoint.model_validate(e.model_dump()) == e  # a python-mode dump (the admin API's update) too


def test_sealing_hides_only_secret_values_and_opening_restores_them() -> None:
    e = endpoint({"X-Team": "billing", "Authorization": {"value": "Bearer s3cr3t", "secret": True}})
    dumped = e.model_dump(mode="json")
    sealed = sealed_json(dumped, lambda text: "T(" + text[::-1] + ")")
    assert sealed["headers"] == {"X-Team": "billing", "Authorization": {"sealed": "T(t3rc3s reraeB)", "secret": True}}
    assert "s3cr3t" not in str(sealed)
    assert Endpoint.model_validate(opened_json(sealed, lambda token: token[2:-1][::-1])) == e
    assert sealed_json(dumped, None)["headers"]["Authorization"] == {"secret": True}  # a file endpoint's
    assert hidden_json(sealed)["headers"] == {"X-Team": "billing", "Authorization": {"value": "***", "secret": True}}
    assert sealed_json({"url": "x"}, None) == {"url": "x"}  # nothing to seal: as it was
    with pytest.raises(ValidationError, match="a sealed value reached a worker unopened"):
        Endpoint.model_validate(sealed)


def test_an_unset_env_secret_header_fails_the_load_of_a_command_that_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    assert "NO_SUCH_TOKEN" in refusal({"Authorization": {"value": "env:NO_SUCH_TOKEN", "secret": True}})


def test_parse_header_line() -> None:
    assert parse_header_line("Authorization: Bearer a:b") == ("Authorization", "Bearer a:b")
    with pytest.raises(ValueError, match="'Name: value'"):
        parse_header_line("no colon")


def config(**delivery: Any) -> dict[str, Any]:
    return {"delivery": delivery}


def test_proxies_are_hidden_and_an_endpoint_names_one_or_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EU_PROXY", "http://eu:pw@10.0.0.2:3128")
    c = WarrenConfig(
        delivery={"proxy": "http://user:pw@10.0.0.1:3128", "proxies": {"eu": "env:EU_PROXY"}},
        endpoints=[
            {"name": n, "url": "https://hooks.example.com/", "secret": TEST_SECRET, "events": ["#"], **extra}
            for n, extra in (("a", {}), ("b", {"proxy": "eu"}), ("c", {"proxy": "direct"}))
        ],
    )
    d = c.delivery
    assert "pw" not in repr(c) and "pw" not in str(d)
    assert [chosen_proxy(e.proxy, d.proxy, d.proxies) for e in c.endpoints] == [
        "http://user:pw@10.0.0.1:3128",
        "http://eu:pw@10.0.0.2:3128",
        None,
    ]
    assert d.proxy is not None and shown_proxy(d.proxy) == "http://***@10.0.0.1:3128"
    assert chosen_proxy(None, None, {}) is None


@pytest.mark.parametrize(
    ("delivery", "message"),
    [
        ({"proxy": "socks5://10.0.0.1:1080"}, "a proxy is an http://host:port URL"),
        ({"proxy": "10.0.0.1:3128"}, "a proxy is an http://host:port URL"),
        ({"proxy": "http://10.0.0.1:3128/path"}, "no path, query or fragment"),
        ({"proxy": "http://10.0.0.1:99999"}, "port"),
        ({"proxies": {"direct": "http://10.0.0.1:1"}}, "a proxy's name is a token"),
        ({"proxies": {"EU": "http://10.0.0.1:1"}}, "a proxy's name is a token"),
    ],
)
def test_malformed_proxies_are_refused(delivery: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WarrenConfig(delivery=delivery)


def test_an_endpoint_naming_an_unknown_proxy_is_refused() -> None:
    ep = {"name": "a", "url": "https://hooks.example.com/", "secret": TEST_SECRET, "events": ["#"], "proxy": "us"}
    with pytest.raises(ValidationError, match=r"endpoint 'a': proxy 'us' is not one of \[delivery.proxies\] \(eu\)"):
        WarrenConfig(delivery={"proxies": {"eu": "http://10.0.0.1:1"}}, endpoints=[ep])
    with pytest.raises(ValidationError, match="proxy is 'direct' or the name"):
        endpoint(proxy="Not A Name")
