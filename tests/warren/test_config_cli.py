"""A bad configuration reaches the user as one line naming the file and the field, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import warren_sync as warren

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[retry]\nbase = "fast"\n', "retry.base"),
        (
            f'[[endpoints]]\nname = "acme"\nurl = "ftp://x.example/"\nsecret = "{SECRET}"\nevents = ["a.*"]\n',
            "endpoints[0] ('acme').url",
        ),
        ('[broker]\nqueue_typ = "quorum"\n', "broker.queue_typ"),
        # Not finite: the delay chain's level count raised OverflowError (a traceback) at setup and in the worker
        ("[retry]\ncap = inf\n", "retry.cap"),
        ("[retry]\nfactor = inf\n", "retry.factor"),
        ("[retry]\ncap = " + "9" * 400 + "\n", "retry.cap"),  # an integer beyond any float
        ('[retry]\ncap = "' + "9" * 400 + 's"\n', "retry.cap"),  # float() reads it as inf
        ('[retry]\nbase = "\u0663s"\n', "retry.base"),  # ARABIC-INDIC DIGIT THREE: \d took it for 3
    ],
)
def test_topology_show_with_a_bad_config_exits_2_with_one_clear_message(tmp_path: Path, text: str, field: str) -> None:
    # Given a configuration file with one mistake
    bad = tmp_path / "bad.toml"
    bad.write_text(text, encoding="utf-8")
    # When `warren topology show --config BAD` runs
    result = warren("topology", "show", "--config", str(bad))
    # Then it exits 2 with one message on stderr naming the file and the field, and no traceback
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and f"{field}:" in lines[0]


def test_a_missing_secret_variable_is_named_and_the_secret_never_printed(tmp_path: Path) -> None:
    bad = tmp_path / "warren.toml"
    bad.write_text(
        '[[endpoints]]\nname = "acme"\nurl = "https://x.example/"\nsecret = "env:ACME_SECRET_UNSET"\nevents = ["a"]\n'
    )
    # The worker signs, so it needs the variable (the other commands load without it: test_example_config.py)
    result = warren("worker", "--config", str(bad))
    assert result.returncode == 2
    assert "ACME_SECRET_UNSET" in result.stderr and "endpoints[0] ('acme').secret" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_config_file_exits_2(tmp_path: Path) -> None:
    result = warren("topology", "show", "--config", str(tmp_path / "absent.toml"))
    assert result.returncode == 2
    assert "absent.toml: file not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_warren_config_environment_variable_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "from-env.toml"
    bad.write_text("[retry]\nmax_attempts = 0\n")
    result = warren("topology", "show", env={"WARREN_CONFIG": str(bad)})
    assert result.returncode == 2
    assert "from-env.toml" in result.stderr and "retry.max_attempts" in result.stderr


@pytest.mark.parametrize("variable", ["WARREN_RETYR__CAP", "WARREN_RETRY__MAX_ATEMPTS", "WARREN_ENDPOINTS__0__URL"])
def test_a_mistaken_environment_override_exits_2_naming_the_variable(tmp_path: Path, variable: str) -> None:
    # Given a good file and an override that names nothing it can set
    good = tmp_path / "warren.toml"
    good.write_text('[broker]\nprefix = "x"\n', encoding="utf-8")
    # When a command loads it
    result = warren("topology", "show", "--config", str(good), env={variable: "10m"})
    # Then it stops with exit 2 and one line naming the variable, never ignoring it
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{variable}: " in lines[0] and "WARREN_* environment" in lines[0], result.stderr


def test_configuration_nested_too_deeply_is_one_clear_line(tmp_path: Path) -> None:
    # Given a file, or a WARREN_* variable's JSON, nested deeper than the parsers recurse (RecursionError before)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    plain = tmp_path / "plain.toml"
    plain.write_text("", encoding="utf-8")
    deep_json = {"WARREN_RETRY": "[" * 30_000 + "]" * 30_000}
    for path, env, says in (
        (deep, None, "deep.toml: not valid TOML: nested too deeply"),
        (plain, deep_json, "(with the WARREN_* environment): a WARREN_* variable holds JSON nested too deeply"),
    ):
        result = warren("topology", "show", "--config", str(path), env=env)
        # Then it exits 2 with one line saying so, and no traceback
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and lines[0].endswith(says), result.stderr
