"""compose.yaml: valid against the Compose specification, with the plugins Warren needs and a setup that
waits for a healthy RabbitMQ (no Docker engine runs here: the file is checked, not started)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from tests.support.rabbit import PLUGINS

ROOT = Path(__file__).resolve().parents[1]
# The Compose specification's JSON schema (compose-spec/compose-spec, Apache-2.0), kept in the repository so
# that the check runs in a clean clone too.
SCHEMA = ROOT / "tests" / "support" / "compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    return document


def test_compose_file_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    errors = sorted(Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_rabbitmq_runs_the_management_image_with_every_plugin_warren_needs(compose: dict[str, Any]) -> None:
    rabbit = compose["services"]["rabbitmq"]
    assert rabbit["image"] == "rabbitmq:3.13-management"
    # Given the enabled_plugins file the service mounts
    mount = next(v for v in rabbit["volumes"] if v.endswith(":/etc/rabbitmq/enabled_plugins:ro"))
    text = (ROOT / mount.split(":")[0]).read_text(encoding="utf-8")
    # Then it is an Erlang list term naming exactly the plugins the tests and .ci/run enable
    match = re.fullmatch(r"\s*\[([a-z_,\s]*)\]\.\s*", text)
    assert match, f"not an Erlang list term: {text!r}"
    assert sorted(p.strip() for p in match.group(1).split(",")) == sorted(PLUGINS)
    ports = {str(p).split(":")[-1].split()[0] for p in rabbit["ports"]}
    assert {"5672", "15672", "15692"} <= ports
    assert rabbit["healthcheck"]["test"][:2] == ["CMD", "rabbitmq-diagnostics"]


def test_setup_is_one_shot_and_waits_for_a_healthy_rabbitmq(compose: dict[str, Any]) -> None:
    setup = compose["services"]["setup"]
    assert setup["depends_on"]["rabbitmq"]["condition"] == "service_healthy"
    assert setup["command"] == ["setup", "--config", "/etc/warren/warren.toml"]
    assert setup["restart"] == "no"
    assert (ROOT / setup["build"] / "Dockerfile").is_file()
    # The config it mounts exists in the repository (the default of the ${WARREN_COMPOSE_CONFIG:-...} form)
    source = setup["volumes"][0].split(":/etc/warren/warren.toml")[0]
    default = re.sub(r"^\$\{[A-Z_]+:-(.*)\}$", r"\1", source)
    assert (ROOT / default).is_file()


def test_the_worker_starts_after_setup_succeeded(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert worker["command"][0] == "worker"
    assert worker["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    url = worker["environment"]["WARREN_BROKER__URL"]
    assert url.startswith("amqp://") and "@rabbitmq:" in url
