"""compose.yaml: valid against the Compose specification, with the plugins Warren needs and a setup that
waits for a healthy RabbitMQ (no Docker engine runs here: the file is checked, not started)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import metadata
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
    # A version the test suite runs on (3.10.8 on the system, 4.0.5 for the second leg), exact
    assert (
        rabbit["image"] in {"rabbitmq:4.0.5-management", "rabbitmq:3.10.8-management"} or "@sha256:" in rabbit["image"]
    )
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


def test_rabbitmq_sends_held_dead_letters_again_within_15_seconds(compose: dict[str, Any]) -> None:
    # Given the advanced.config file the service mounts
    rabbit = compose["services"]["rabbitmq"]
    mount = next(v for v in rabbit["volumes"] if v.endswith(":/etc/rabbitmq/advanced.config:ro"))
    path = ROOT / mount.split(":")[0]
    erl = shutil.which("erl")
    if erl is None:
        pytest.skip("no Erlang here to read the file as RabbitMQ does (file:consult)")
    # When Erlang reads it as RabbitMQ reads advanced.config
    read = (
        f'{{ok, [Terms]}} = file:consult("{path}"), '
        'io:format("~p", [proplists:get_value(dead_letter_worker_publisher_confirm_timeout, '
        "proplists:get_value(rabbit, Terms))]), halt()."
    )
    result = subprocess.run([erl, "-noshell", "-eval", read], capture_output=True, text=True, timeout=60, check=False)
    # Then the dead-letter worker's confirm timeout is 15 s (RabbitMQ's default, 180 s, held retries 3 minutes)
    assert result.stdout.strip() == "15000", result.stderr


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


def test_images_are_pinned_with_a_word_on_their_digest() -> None:
    # Given the compose file and the Dockerfile as text (comments included)
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    # Then each image is an exact version, and either carries its digest or says how to pin one
    for source, image in (
        (text, re.search(r"image: (rabbitmq:\S+)", text)),
        (dockerfile, re.search(r"^FROM (\S+)", dockerfile, re.M)),
    ):
        assert image is not None
        name = image.group(1)
        assert re.search(r":\d+\.\d+\.\d+", name), f"{name} is not an exact version"
        assert "@sha256:" in name or "imagetools inspect" in source, f"{name}: no digest and no way to pin one"


def test_the_image_runs_the_tested_python_with_the_tested_versions() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    # The base image is the Python the tests run on
    tested = ".".join(map(str, sys.version_info[:3]))
    assert re.search(rf"^FROM python:{re.escape(tested)}-slim", dockerfile, re.M), tested
    # It copies the package (all of Warren is under warren/), and installs with the postgres and otel extras and
    # the constraints file, which pins exactly the versions installed here (where the tests ran)
    assert "COPY warren ./warren" in dockerfile
    assert not re.search(r"^COPY (topology|broker|consumers|store)\b", dockerfile, re.M)
    assert 'pip install -c constraints.txt ".[postgres,otel]"' in dockerfile and "constraints.txt" in dockerfile
    assert re.search(r"^HEALTHCHECK .*readyz", dockerfile, re.M | re.S)
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert not any(name.lower() == "warren-webhooks" for name in pins)
    wanted = [re.split(r"[<>=!~; \[]", r, maxsplit=1)[0] for r in metadata.requires("warren-webhooks") or []]
    for name in {w for w in wanted if w and w != "warren-webhooks"}:
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency of another platform (uvloop on Windows)
        found = {k.lower().replace("_", "-"): v for k, v in pins.items()}.get(name.lower().replace("_", "-"))
        assert found == installed, f"{name}: constraints.txt says {found}, the tests ran on {installed}"


def test_the_worker_is_healthy_only_when_ready(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    port = worker["environment"]["WARREN_WORKER__METRICS_PORT"]
    assert worker["environment"]["WARREN_WORKER__METRICS_HOST"] == "0.0.0.0"
    assert f"http://127.0.0.1:{port}/readyz" in " ".join(worker["healthcheck"]["test"])
    # The shared settings are kept (a YAML merge is shallow: the worker's environment must merge them again)
    assert (
        worker["environment"]["WARREN_BROKER__URL"] == compose["services"]["setup"]["environment"]["WARREN_BROKER__URL"]
    )
    assert "ACME_WEBHOOK_SECRET" in worker["environment"]


def test_the_api_serves_the_ingest_endpoint_after_setup(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    assert api["command"] == ["api"]
    assert api["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    environment = api["environment"]
    port = environment["WARREN_API__PORT"]
    assert environment["WARREN_API__HOST"] == "0.0.0.0" and f"{port}:{port}" in api["ports"][0]
    assert (
        json.loads(environment["WARREN_API__TOKENS"]) == ["env:WARREN_API_TOKEN"] and "WARREN_API_TOKEN" in environment
    )
    assert f"http://127.0.0.1:{port}/readyz" in " ".join(api["healthcheck"]["test"])
    assert "@rabbitmq:" in environment["WARREN_BROKER__URL"]
