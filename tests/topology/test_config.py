"""Configuration: the example files load, every bad file gets one ConfigError naming file and field,
the environment wins over the file, and secrets stay hidden."""

from __future__ import annotations

from pathlib import Path

import pytest

from warren.topology.config import ConfigError, WarrenConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "warren.toml"
DEMO = ROOT / "examples" / "demo.toml"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_C2FtcGxlU2VjcmV0Rm9yV2FycmVuRGVtbzE="

BROKER = '[broker]\nurl = "amqp://guest:guest@127.0.0.1:5672/%2F"\n'


def endpoint(name: str = "acme", url: str = "https://hooks.example/in", extra: str = "", secret: str = SECRET) -> str:
    return f'[[endpoints]]\nname = "{name}"\nurl = "{url}"\nsecret = "{secret}"\nevents = ["message.*"]\n{extra}\n'


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No WARREN_* override from the developer's shell may leak into these tests."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("WARREN_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "warren.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_file_loads_with_the_documented_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the shipped example and the environment variable its first secret refers to
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", OTHER_SECRET)
    # When it is loaded
    config = load_config(EXAMPLE)
    # Then every value of the user-facing shape is there
    assert config.broker.prefix == "warren"
    assert config.broker.queue_type == "quorum"
    assert config.broker.vhost == "/"
    assert (config.retry.base, config.retry.factor, config.retry.cap) == (2.0, 2.0, 3600.0)
    assert (config.retry.max_attempts, config.retry.max_age, config.retry.jitter) == (10, 3 * 86400.0, "full")
    assert config.delivery.allow_private_networks is False
    acme, billing = config.endpoints
    assert (acme.name, acme.ordering, acme.concurrency, acme.timeout) == ("acme", "none", 64, 10.0)
    assert acme.events == ("message.*",)
    assert [s.reveal() for s in acme.secret] == [OTHER_SECRET]
    assert (billing.name, billing.ordering, billing.partition_count, billing.partition_prefetch) == (
        "billing",
        "key",
        8,
        16,
    )
    assert billing.events == ("order.paid", "order.refunded")


def test_the_demo_file_loads_four_local_endpoints_one_ordered_one_on_a_lane() -> None:
    config = load_config(DEMO)
    assert len(config.endpoints) == 4
    assert [e.name for e in config.endpoints if e.home == "lane"] == ["tail"] and config.lanes.count == 2
    assert config.delivery.allow_private_networks is True
    assert (config.retry.base, config.retry.cap, config.retry.max_attempts) == (0.2, 2.0, 4)
    assert all(e.url.startswith("http://127.0.0.1:") for e in config.endpoints)
    assert [e.partition_count for e in config.endpoints if e.ordering == "key"] == [8]
    assert [e.partition_prefetch for e in config.endpoints if e.ordering == "key"] == [16]  # the default


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (BROKER + '[retry]\nbase = "2 parsecs"\n', "retry.base", "not a duration"),
        (BROKER + '[retry]\ncap = "-5s"\n', "retry.cap", "duration"),
        (BROKER + endpoint(extra='timeout = "soon"'), "endpoints[0] ('acme').timeout", "not a duration"),
        (BROKER + endpoint(name="Bad Name"), "endpoints[0] ('Bad Name').name", "token"),
        (BROKER + endpoint(url="ftp://hooks.example/in"), "endpoints[0] ('acme').url", "http"),
        (BROKER + endpoint(url="hooks.example/in"), "endpoints[0] ('acme').url", "http"),
        ('[broker]\nurl = "http://127.0.0.1:5672/"\n', "broker.url", "amqp"),
        (BROKER + endpoint(secret="env:WARREN_TEST_NOT_SET_ANYWHERE"), "endpoints[0] ('acme').secret", "not set"),
        (BROKER + endpoint(secret="whsec_c2hvcnQ="), "endpoints[0] ('acme').secret", "16 bytes"),
        (BROKER + endpoint(extra="partitions = 4"), "endpoints[0] ('acme')", "partitions"),
        (BROKER + endpoint() + endpoint(), "endpoints", "'acme' appears twice"),
        (
            BROKER + endpoint(extra='ordering = "key"\npartition_prefetch = 0'),
            "endpoints[0] ('acme').partition_prefetch",
            "greater than or equal to 1",
        ),
        # A key the configuration does not have: the closest one it has, else the list (as for WARREN_* variables)
        (BROKER + '[retry]\nbse = "2s"\n', "retry.bse", "unknown key (did you mean base?)"),
        (BROKER + '[retyr]\nbase = "2s"\n', "retyr", "unknown key (did you mean retry?)"),
        (BROKER + endpoint(extra="concurency = 4"), "endpoints[0] ('acme').concurency", "(did you mean concurrency?)"),
        (BROKER + endpoint(extra="retry = { max_atempts = 3 }"), "retry.max_atempts", "(did you mean max_attempts?)"),
        (BROKER + endpoint(extra="colour = 'red'"), "endpoints[0] ('acme').colour", "unknown key (known: all_tenants,"),
        (BROKER + '[retry]\njitter = "some"\n', "retry.jitter", "'full' or 'none'"),
        (BROKER + endpoint(extra='ordering = "strict"'), "endpoints[0] ('acme').ordering", "'none' or 'key'"),
        ('[broker]\nqueue_type = "stream"\n', "broker.queue_type", "'quorum' or 'classic'"),
        ("[broker\n", "", "not valid TOML"),
        # RabbitMQ 4.x refuses a message over 16 MiB by default: a bigger payload could never be published
        (BROKER + "[delivery]\nmax_payload = 16777217\n", "delivery.max_payload", "less than or equal to 16777216"),
    ],
)
def test_each_bad_file_gives_one_error_naming_file_and_field(
    tmp_path: Path, text: str, field: str, problem: str
) -> None:
    # Given a file with one mistake
    path = write(tmp_path, text)
    # When it is loaded
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    # Then the message names the file, the field and what is wrong, on one line
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert f"{field}: " in message
    assert problem in message
    assert "\n" not in message
    assert len(caught.value.problems) == 1


def test_several_mistakes_are_all_listed(tmp_path: Path) -> None:
    path = write(tmp_path, BROKER + '[retry]\nbase = "x"\nmax_attempts = 0\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert len(caught.value.problems) == 2
    assert "retry.base" in str(caught.value) and "retry.max_attempts" in str(caught.value)


def test_a_missing_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nowhere\.toml: file not found"):
        load_config(tmp_path / "nowhere.toml")


def test_warren_config_names_the_file_when_no_path_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BROKER + "[retry]\nmax_attempts = 3\n")
    monkeypatch.setenv("WARREN_CONFIG", str(path))
    assert load_config().retry.max_attempts == 3


def test_environment_overrides_win_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a file that sets the broker URL and max_attempts
    path = write(tmp_path, BROKER + '[retry]\nmax_attempts = 10\nbase = "1s"\n' + endpoint())
    # And environment overrides for both
    monkeypatch.setenv("WARREN_BROKER__URL", "amqp://u:p@rabbit.internal:5672/prod")
    monkeypatch.setenv("WARREN_RETRY__MAX_ATTEMPTS", "3")
    # When it is loaded
    config = load_config(path)
    # Then the environment wins, and what it does not mention keeps the file's value
    assert config.broker.url == "amqp://u:p@rabbit.internal:5672/prod"
    assert config.broker.vhost == "prod"
    assert config.retry.max_attempts == 3
    assert config.retry.base == 1.0
    assert config.endpoints[0].name == "acme"


def test_a_bad_environment_override_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BROKER)
    monkeypatch.setenv("WARREN_RETRY__MAX_ATTEMPTS", "many")
    with pytest.raises(ConfigError, match=r"retry\.max_attempts"):
        load_config(path)


def test_env_reference_reads_the_secret_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a secret field that names an environment variable
    monkeypatch.setenv("ACME_SECRET", OTHER_SECRET)
    path = write(tmp_path, BROKER + endpoint(secret="env:ACME_SECRET"))
    # When it is loaded, then the key is the variable's, and the file never held it
    (secret,) = load_config(path).endpoints[0].secret
    assert secret.reveal() == OTHER_SECRET
    assert OTHER_SECRET not in path.read_text()


def test_a_list_of_secrets_is_a_rotation(tmp_path: Path) -> None:
    text = BROKER + endpoint().replace(f'secret = "{SECRET}"', f'secret = ["{SECRET}", "{OTHER_SECRET}"]')
    secrets = load_config(write(tmp_path, text)).endpoints[0].secret
    assert [s.reveal() for s in secrets] == [SECRET, OTHER_SECRET]


def test_a_secret_never_shows_in_repr_str_or_a_dump_repr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a configuration holding one inline secret and one from the environment
    monkeypatch.setenv("BILLING_SECRET", OTHER_SECRET)
    text = BROKER + endpoint() + endpoint(name="billing", secret="env:BILLING_SECRET")
    config = load_config(write(tmp_path, text))
    # Then neither secret, nor its base64 body, shows in any text form of the configuration
    for shown in (repr(config), str(config), repr(config.model_dump()), repr(config.endpoints), str(config.endpoints)):
        for secret in (SECRET, OTHER_SECRET):
            assert secret not in shown
            assert secret.removeprefix("whsec_") not in shown


@pytest.mark.parametrize(
    "bad_secret",
    [
        "whsec_c2hvcnQ=",  # valid base64, too short
        "whsec_not base64 at all!!",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  # the key without its prefix
    ],
)
def test_a_bad_secret_is_not_echoed_in_the_error(tmp_path: Path, bad_secret: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, BROKER + endpoint(secret=bad_secret)))
    assert "secret" in str(caught.value)
    assert bad_secret not in str(caught.value)
    assert bad_secret.removeprefix("whsec_") not in str(caught.value)


def test_a_secret_in_a_misspelt_key_is_not_echoed(tmp_path: Path) -> None:
    text = BROKER + endpoint(extra=f'secrett = "{OTHER_SECRET}"')
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert "secrett" in str(caught.value)
    assert OTHER_SECRET not in str(caught.value)


def test_the_models_are_frozen() -> None:
    config = WarrenConfig()
    with pytest.raises(ValueError):
        config.retry.base = 1.0  # type: ignore[misc]


def test_per_endpoint_retry_overrides_only_what_it_names(tmp_path: Path) -> None:
    text = BROKER + '[retry]\nbase = "1s"\nmax_attempts = 5\n' + endpoint(extra="[endpoints.retry]\nmax_attempts = 9\n")
    config = load_config(write(tmp_path, text))
    policy = config.endpoints[0].retry_policy(config.retry)
    assert (policy.max_attempts, policy.base) == (9, 1.0)
    assert config.retry.max_attempts == 5


def test_a_list_value_comes_from_the_environment_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARREN_RETRY__SCHEDULE", '["1s", "5m"]')
    assert load_config(write(tmp_path, BROKER)).retry.schedule == (1.0, 300.0)


def test_malformed_json_in_the_environment_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a WARREN_* variable that should hold JSON but does not
    monkeypatch.setenv("WARREN_ENDPOINTS", "[{")
    # Then loading says so as a ConfigError (exit 2 in the CLI), not a pydantic-settings traceback
    with pytest.raises(ConfigError, match=r"WARREN_\* environment.*endpoints"):
        load_config(write(tmp_path, BROKER))


def test_broker_passwords_stay_out_of_repr(tmp_path: Path) -> None:
    text = '[broker]\nurl = "amqp://warren:s3cret-amqp@rabbit:5672/%2F"\nmanagement_url = "http://ops:s3cret-http@rabbit:15672"\n'
    config = load_config(write(tmp_path, text))
    assert config.broker.url.startswith("amqp://warren:s3cret-amqp@")
    for shown in (repr(config), str(config), repr(config.broker)):
        assert "s3cret" not in shown
