"""Webhook secrets: parsed from ``whsec_<base64>``, resolved from ``env:NAME``, never shown."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from warren.topology.config import ConfigError, load_config
from warren.topology.secrets import (
    SecretError,
    SigningSecrets,
    UnresolvedSecrets,
    UnresolvedText,
    WebhookSecret,
    resolve_secret_text,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_a_secret_keeps_its_key_bytes_and_reveals_its_text() -> None:
    secret = WebhookSecret(SECRET)
    assert secret.key == base64.b64decode(SECRET.removeprefix("whsec_"))
    assert secret.reveal() == SECRET
    assert secret == WebhookSecret(SECRET)
    assert hash(secret) == hash(WebhookSecret(SECRET))


def test_a_secret_hides_itself_in_repr_str_and_formatting() -> None:
    secret = WebhookSecret(SECRET)
    body = SECRET.removeprefix("whsec_")
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr([secret])):
        assert body not in shown
    secrets = SigningSecrets((secret,))
    assert body not in repr(secrets) and body not in str(secrets)
    assert "1 hidden" in repr(secrets)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with 'whsec_'"),
        ("whsec_", "16 bytes"),
        ("whsec_c2hvcnQ=", "16 bytes"),
        ("whsec_!!!notbase64!!!", "not valid base64"),
    ],
)
def test_malformed_secrets_are_refused_without_echoing_them(text: str, problem: str) -> None:
    with pytest.raises(SecretError, match=problem) as caught:
        WebhookSecret(text)
    body = text.removeprefix("whsec_")
    if body:
        assert body not in str(caught.value)


def test_signing_secrets_need_at_least_one_and_iterate_in_order() -> None:
    with pytest.raises(SecretError):
        SigningSecrets(())
    first, second = WebhookSecret(SECRET), WebhookSecret("whsec_" + base64.b64encode(b"k" * 32).decode())
    secrets = SigningSecrets((first, second))
    assert list(secrets) == [first, second]
    assert len(secrets) == 2


def test_env_reference_resolves_from_the_given_environment() -> None:
    assert resolve_secret_text("env:HOOK_SECRET", {"HOOK_SECRET": f"  {SECRET}\n"}) == SECRET
    assert resolve_secret_text(SECRET, {}) == SECRET


@pytest.mark.parametrize(("text", "problem"), [("env:", "must be followed"), ("env:MISSING", "MISSING .* not set")])
def test_env_reference_errors_name_the_variable(text: str, problem: str) -> None:
    with pytest.raises(SecretError, match=problem):
        resolve_secret_text(text, {"OTHER": SECRET})


def test_a_command_that_signs_nothing_loads_without_the_secret_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an endpoint whose secret is env:MISSING_SECRET_X, and that variable not set
    monkeypatch.delenv("MISSING_SECRET_X", raising=False)
    path = tmp_path / "warren.toml"
    path.write_text(
        '[[endpoints]]\nname = "acme"\nurl = "https://example.com/h"\nsecret = "env:MISSING_SECRET_X"\nevents = ["#"]\n'
    )
    # When it is loaded for signing, it fails naming the variable
    with pytest.raises(ConfigError, match="MISSING_SECRET_X"):
        load_config(path)
    # And loaded by a command that signs nothing, it loads; signing with it raises the same problem
    config = load_config(path, signing_secrets=False)
    secrets = config.endpoints[0].secret
    assert isinstance(secrets, UnresolvedSecrets) and len(secrets) == 1
    with pytest.raises(SecretError, match="MISSING_SECRET_X"):
        list(secrets)
    # And a dump keeps the reference, never a made-up key
    assert config.model_dump(mode="json")["endpoints"][0]["secret"] == ["env:MISSING_SECRET_X"]


def test_a_malformed_literal_secret_fails_even_for_a_command_that_signs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "warren.toml"
    path.write_text('[[endpoints]]\nname = "a"\nurl = "https://example.com/h"\nsecret = "nope"\nevents = ["#"]\n')
    with pytest.raises(ConfigError, match="whsec_"):
        load_config(path, signing_secrets=False)


SERVED_SECRETS = """
[api]
tokens = ["env:MISSING_API_TOKEN_X", "a-literal-token-of-enough-length"]
admin_tokens = ["env:MISSING_ADMIN_TOKEN_X"]

[[inbound]]
name = "shop"
verifier = "hmac-sha256"
secret = "env:MISSING_INBOUND_X"
header = "x-signature"
id_field = "id"
handler = "app.hooks:on_event"
"""


def test_each_server_loads_without_the_other_servers_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given API tokens and an inbound source's secret read from variables that are not set
    for name in ("MISSING_API_TOKEN_X", "MISSING_ADMIN_TOKEN_X", "MISSING_INBOUND_X"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "warren.toml"
    path.write_text(SERVED_SECRETS)
    # When it is loaded for every use, it fails naming each variable
    with pytest.raises(ConfigError) as strict:
        load_config(path)
    assert all(n in str(strict.value) for n in ("MISSING_API_TOKEN_X", "MISSING_ADMIN_TOKEN_X", "MISSING_INBOUND_X"))
    # And warren api (its tokens) fails naming only its own; warren receive (the inbound secrets) likewise
    with pytest.raises(ConfigError) as api:
        load_config(path, inbound_secrets=False)
    assert "MISSING_API_TOKEN_X" in str(api.value) and "MISSING_INBOUND_X" not in str(api.value)
    with pytest.raises(ConfigError) as receive:
        load_config(path, api_tokens=False)
    assert "MISSING_INBOUND_X" in str(receive.value) and "MISSING_API_TOKEN_X" not in str(receive.value)
    # And a command that uses neither (the worker, setup, status...) loads; using one raises the same problem
    config = load_config(path, api_tokens=False, inbound_secrets=False)
    unresolved = [config.api.tokens[0], config.api.admin_tokens[0], config.inbound[0].secret[0]]  # type: ignore[index]
    assert all(isinstance(t, UnresolvedText) for t in unresolved)
    with pytest.raises(SecretError, match="MISSING_API_TOKEN_X"):
        config.api.tokens[0].get_secret_value()
    with pytest.raises(SecretError, match="MISSING_INBOUND_X"):
        config.inbound[0].secret[0].get_secret_value()  # type: ignore[index]
    assert config.api.tokens[1].get_secret_value() == "a-literal-token-of-enough-length"
    assert "MISSING_API_TOKEN_X" in repr(config.api.tokens[0])
    # And a dump keeps the references, never a made-up value
    dumped = config.model_dump(mode="json")
    assert dumped["api"]["tokens"] == ["env:MISSING_API_TOKEN_X", "a-literal-token-of-enough-length"]
    assert dumped["inbound"][0]["secret"] == ["env:MISSING_INBOUND_X"]


def test_a_weak_literal_token_fails_even_for_a_command_that_serves_no_api(tmp_path: Path) -> None:
    path = tmp_path / "warren.toml"
    path.write_text('[api]\ntokens = ["short"]\n')
    with pytest.raises(ConfigError, match="at least 16"):
        load_config(path, api_tokens=False, inbound_secrets=False)


def test_a_secret_with_an_end_signs_until_that_moment_and_never_after() -> None:
    # Given the secrets of a rotation: the new one (no end) and the old one, ending at t=100
    new = WebhookSecret("whsec_" + base64.b64encode(b"n" * 24).decode())
    old = WebhookSecret("whsec_" + base64.b64encode(b"o" * 24).decode(), expires_at=100.0)
    secrets = SigningSecrets((new, old))
    # Then both sign before the end, and the new one alone from the end on (the end itself included)
    assert secrets.signing(99.999) == (new, old)
    assert secrets.signing(100.0) == (new,)
    assert secrets.signing(1e12) == (new,)
    # And the end is part of a secret's identity: the same key with another end is another secret
    assert old != WebhookSecret(old.reveal(), expires_at=200.0) and old == WebhookSecret(old.reveal(), 100.0)
    assert hash(old) != hash(WebhookSecret(old.reveal()))


def test_secrets_whose_every_end_passed_still_sign_with_the_newest() -> None:
    # Given a hand-made list whose every secret has ended (a rotation always leaves one without an end)
    first = WebhookSecret("whsec_" + base64.b64encode(b"a" * 24).decode(), expires_at=10.0)
    second = WebhookSecret("whsec_" + base64.b64encode(b"b" * 24).decode(), expires_at=20.0)
    secrets = SigningSecrets((first, second))
    # Then the ones still running sign, and once none is, the newest (the first) does rather than none
    assert secrets.signing(15.0) == (second,)
    assert secrets.signing(30.0) == (first,)
