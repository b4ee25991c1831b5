"""``[[inbound]]``, ``[inbox]`` and ``[receiver]``: what is accepted, what is refused and how it is said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from warren.topology.config import ConfigError, InboundSource, InboxSettings, WarrenConfig, load_config

WH_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
LONG = "sixteen-bytes-or-more"


def source(**fields: Any) -> InboundSource:
    return InboundSource.model_validate({"name": "src", "handler": "pkg.mod:fn", **fields})


def problem(**fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        source(**fields)
    return str(caught.value)


def test_standard_webhooks_defaults_its_id_header_and_path() -> None:
    s = source(verifier="standard-webhooks", secret=WH_SECRET)
    assert s.event_id_header == "webhook-id"
    assert s.route == "/in/src"
    assert s.tolerance == 300.0
    assert len(s.signing_secrets()) == 1


def test_the_verifier_must_be_declared_even_for_none() -> None:
    assert "verifier" in problem(id_field="id")
    assert source(verifier="none", id_field="id").verifier == "none"


def test_none_takes_no_secret_and_the_others_need_one() -> None:
    assert "takes no secret" in problem(verifier="none", id_field="id", secret="x")
    assert "needs a secret" in problem(verifier="token", header="X-T", id_field="id")


def test_standard_webhooks_secrets_must_be_whsec() -> None:
    assert "whsec_" in problem(verifier="standard-webhooks", secret="plain-text")


@pytest.mark.parametrize("verifier", ["hmac-sha256", "token"])
@pytest.mark.parametrize(
    "secret", ["a", " ", "fifteen-bytes!!", " " * 20, "\t\n" * 10, ["a-good-long-secret-0123", "short"]]
)
def test_inbound_secrets_need_16_bytes_and_not_only_whitespace(verifier: str, secret: str | list[str]) -> None:
    # Given an hmac or token source with a guessable secret; When it is validated; Then it is refused, clearly
    text = problem(verifier=verifier, secret=secret, header="X-Sig", id_header="X-Id")
    assert "at least 16 bytes" in text or "whitespace" in text


def test_a_16_byte_inbound_secret_is_accepted() -> None:
    assert source(verifier="token", secret="é" * 8, header="X-T", id_header="X-Id").secret is not None


@pytest.mark.parametrize("token", [" " * 20, "\t" * 16])
def test_api_tokens_cannot_be_whitespace_only(token: str) -> None:
    with pytest.raises(ValidationError, match="whitespace"):
        WarrenConfig(api={"tokens": [token]})


def test_hmac_and_token_need_their_header() -> None:
    assert "header" in problem(verifier="hmac-sha256", secret=LONG, id_header="X-Id")
    assert "header" in problem(verifier="token", secret=LONG, id_header="X-Id")


def test_the_event_id_must_come_from_somewhere_and_only_one_place() -> None:
    assert "id_header or id_field" in problem(verifier="token", secret=LONG, header="X-T")
    assert "not both" in problem(verifier="token", secret=LONG, header="X-T", id_header="X-Id", id_field="id")


def test_handler_and_path_shapes() -> None:
    assert "module:function" in problem(verifier="none", id_field="id", handler="no_colon")
    assert "path" in problem(verifier="none", id_field="id", path="relative")
    assert source(verifier="none", id_field="id", path="/hooks/shop").route == "/hooks/shop"


def test_secrets_are_hidden_and_resolved_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TG_TOKEN", "the-token-value-0123")
    s = source(verifier="token", secret=["env:TG_TOKEN", "literal-secret-0123"], header="X-T", id_field="update_id")
    assert s.secret is not None
    assert [x.get_secret_value() for x in s.secret] == ["the-token-value-0123", "literal-secret-0123"]
    assert "the-token-value-0123" not in repr(s) and "literal-secret-0123" not in repr(s)


def test_a_missing_environment_variable_is_named() -> None:
    assert "NOT_SET_ANYWHERE_123" in problem(
        verifier="token", secret="env:NOT_SET_ANYWHERE_123", header="X-T", id_field="id"
    )


def test_source_names_and_paths_are_unique() -> None:
    a = {"name": "a", "verifier": "none", "id_field": "id", "handler": "m:f"}
    with pytest.raises(ValidationError, match="appears twice"):
        WarrenConfig(inbound=[a, a])
    with pytest.raises(ValidationError, match="used by two sources"):
        WarrenConfig(inbound=[{**a, "path": "/x"}, {**a, "name": "b", "path": "/x"}])


def test_inbox_settings_defaults_and_store_urls() -> None:
    inbox = InboxSettings()
    assert inbox.store.startswith("sqlite:///")
    assert inbox.retention == 7 * 86400
    assert InboxSettings(store="postgresql://u@h/db", retention="2d").retention == 2 * 86400
    with pytest.raises(ValidationError, match="sqlite"):
        InboxSettings(store="mysql://x")


def test_a_toml_file_with_inbound_sources(tmp_path: Path) -> None:
    file = tmp_path / "warren.toml"
    file.write_text(
        """
[inbox]
store = "sqlite:///var/inbox.sqlite3"
retention = "3d"

[receiver]
port = 9000

[[inbound]]
name = "github"
verifier = "hmac-sha256"
secret = "gh-secret-0123456789"
header = "X-Hub-Signature-256"
signature_prefix = "sha256="
id_header = "X-GitHub-Delivery"
handler = "app.hooks:on_github"
retry = { max_attempts = 3 }
""",
        encoding="utf-8",
    )
    config = load_config(file)
    assert config.inbound[0].name == "github"
    assert config.inbound[0].retry_policy(config.retry).max_attempts == 3
    assert config.receiver.port == 9000
    assert config.inbox.retention == 3 * 86400


def test_a_bad_inbound_entry_names_the_source(tmp_path: Path) -> None:
    file = tmp_path / "warren.toml"
    file.write_text('[[inbound]]\nname = "shop"\nhandler = "a:b"\nid_field = "id"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"inbound\[0\] \('shop'\)\.verifier"):
        load_config(file)
