"""The private-address guard's pure side: the host judged as aiohttp connects to it, and refused at config load."""

# ruff: noqa: RUF001  (the lookalike digits and full stops are the point of these tests)

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w

from warren.topology.addresses import connect_host, forbidden_reason, url_host_problem
from warren.topology.config import ConfigError, load_config

# Forms that reach 127.0.0.1 (or the metadata address) once yarl has folded them, or that the C library maps
# onto an address: every one must be refused when private networks are not allowed.
BYPASS_FORMS = [
    ("http://１２７.０.０.１:9/", "loopback"),  # fullwidth digits
    ("http://127。0。0。1:9/", "loopback"),  # U+3002 ideographic full stop
    ("http://127．0．0．1:9/", "loopback"),  # U+FF0E fullwidth full stop
    ("http://127｡0｡0｡1:9/", "loopback"),  # U+FF61 halfwidth ideographic full stop
    ("http://①②⑦.⓪.⓪.①:9/", "loopback"),  # circled digits
    ("http://１６９.２５４.１６９.２５４/", "link-local"),  # the cloud metadata address, fullwidth
    ("http://2130706433/", "canonical"),  # decimal
    ("http://0177.0.0.1/", "canonical"),  # octal
    ("http://0x7f.0.0.1/", "canonical"),  # hex
    ("http://0x7f000001/", "canonical"),
    ("http://127.1/", "canonical"),
    ("http://127.0.0.1./", "canonical"),  # trailing dot
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://localhost:9/", "loopback"),
    ("http://LOCALHOST./", "loopback"),
    ("http://api.localhost/", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://[fc00::1]/", "private"),
    ("http://[fd12:3456::1]/", "private"),
    ("http://[fe80::1]/", "link-local"),
]


@pytest.mark.parametrize(("url", "why"), BYPASS_FORMS)
def test_every_form_of_a_private_host_is_refused(url: str, why: str) -> None:
    # Given a URL whose host, as aiohttp connects to it, is not public; When it is judged; Then it is refused
    problem = url_host_problem(url)
    assert problem is not None and why in problem


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://93.184.216.34:8080/", "https://bücher.example/", "http://[2606:4700::1111]/"],
)
def test_public_hosts_and_names_pass(url: str) -> None:
    # Names are judged on their DNS answers at connect time; international names are fine
    assert url_host_problem(url) is None


def test_the_host_is_the_one_yarl_connects_to() -> None:
    assert connect_host("http://１２７.０.０.１:9/x") == "127.0.0.1"
    assert connect_host("http://①②⑦.⓪.⓪.①/") == "127.0.0.1"
    assert connect_host("http://[::ffff:127.0.0.1]/") == "::ffff:7f00:1"


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("10.255.0.1", "private"),
        ("172.20.1.1", "private"),
        ("192.168.0.10", "private"),
        ("fc00::5", "private"),
        ("fe80::1%eth0", "link-local"),
        ("169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
    ],
)
def test_resolved_addresses_in_private_ranges_are_refused(address: str, why: str) -> None:
    reason = forbidden_reason(address)
    assert reason is not None and why in reason


def _write(tmp_path: Path, url: str, allow: bool) -> Path:
    path = tmp_path / "warren.toml"
    endpoint = {"name": "sneaky", "url": url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["#"]}
    path.write_text(tomli_w.dumps({"delivery": {"allow_private_networks": allow}, "endpoints": [endpoint]}))
    return path


@pytest.mark.parametrize(("url", "why"), [BYPASS_FORMS[0], BYPASS_FORMS[2], BYPASS_FORMS[4], BYPASS_FORMS[5]])
def test_config_load_refuses_a_private_endpoint_naming_it(tmp_path: Path, url: str, why: str) -> None:
    # Given a configuration whose endpoint URL folds to a private address, private networks not allowed
    path = _write(tmp_path, url, allow=False)
    # When it is loaded, Then the error names the endpoint and says why
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    text = str(raised.value)
    assert "sneaky" in text and why in text and "allow_private_networks" in text


def test_config_load_allows_private_endpoints_when_told_to(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, "http://１２７.０.０.１:9/", allow=True))
    assert config.endpoints[0].name == "sneaky"


def test_config_load_refuses_a_non_canonical_literal_even_when_private_is_allowed(tmp_path: Path) -> None:
    # aiohttp refuses these at connect time anyway: say so at load, not at the first delivery
    with pytest.raises(ConfigError, match="canonical"):
        load_config(_write(tmp_path, "http://127.1:9/", allow=True))
