"""Environment overrides: every WARREN_SECTION__KEY is checked against the models, and a mistake names the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.topology.test_config import BROKER, clean_environment, endpoint, write
from warren.topology.config import ConfigError, WarrenConfig, load_config
from warren.topology.env_overrides import override_problems, override_variables

__all__ = ["clean_environment"]


@pytest.mark.parametrize(
    ("variable", "says"),
    [
        ("WARREN_RETRY__MAX_ATEMPTS", "[retry] has no key 'max_atempts' (did you mean max_attempts?)"),
        ("WARREN_RETYR__CAP", "the configuration has no key 'retyr' (did you mean retry?)"),
        ("warren_delivery__grace", "[delivery] has no key 'grace' (did you mean grace_period?)"),
        ("WARREN_ENDPOINTS__0__URL", "single entries of endpoints cannot be overridden; set WARREN_ENDPOINTS"),
        ("WARREN_INBOUND__0__SECRET", "single entries of inbound cannot be overridden"),
        ("WARREN_BROKER__URL__HOST", "single entries of broker.url cannot be overridden; set WARREN_BROKER__URL to"),
        ("WARREN_BROKER__PREFIX__X", "broker.prefix is a value, not a section with keys"),
        ("WARREN_RETRY__", "[retry] has no key ''"),
    ],
)
def test_a_mistaken_override_is_refused_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, says: str
) -> None:
    # Given an override that names no field (or one inside a list)
    monkeypatch.setenv(variable, "10")
    # When the configuration is loaded
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, BROKER + endpoint()))
    # Then the one problem names the variable and says what is wrong, never silently ignored
    assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith(f"{variable}: {says}")
    assert "WARREN_* environment" in str(caught.value)


def test_a_bad_value_names_the_variable_it_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARREN_RETRY__CAP", "soon")
    with pytest.raises(ConfigError, match=r"retry\.cap \(set by WARREN_RETRY__CAP\): 'soon' is not a duration"):
        load_config(write(tmp_path, BROKER))


def test_other_warren_variables_are_not_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given variables that are not overrides: the config path, a secret read by env:, test settings
    environ = {"WARREN_CONFIG": "x.toml", "WARREN_API_TOKEN": "t" * 20, "WARREN_TEST_AMQP_URL": "amqp://x/"}
    environ |= {"WARREN_RETRY__BASE": "1s", "WARREN_RETRY": "{}", "PATH": "/bin"}
    # Then only the overrides are taken for overrides, and none of them is a problem
    assert override_variables(environ, WarrenConfig) == {
        "WARREN_RETRY__BASE": ("retry", "base"),
        "WARREN_RETRY": ("retry",),
    }
    assert override_problems(environ, WarrenConfig) == []
    monkeypatch.setenv("WARREN_API_TOKEN", "t" * 20)
    monkeypatch.setenv("WARREN_RETRY__BASE", "1s")
    assert load_config(write(tmp_path, BROKER)).retry.base == 1.0
