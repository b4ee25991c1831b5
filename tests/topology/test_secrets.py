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
