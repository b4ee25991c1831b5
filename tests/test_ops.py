"""The shipped alert rules and Grafana dashboard refer only to metrics that exist. Pure: no broker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from warren.consumers.hooks import AttemptRecord
from warren.consumers.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parent.parent
WARREN_NAME = re.compile(r"\bwarren_[a-z_]+")
RABBIT_NAME = re.compile(r"\brabbitmq_detailed_[a-z_]+")
# Families of RabbitMQ's /metrics/detailed?family=queue_coarse_metrics&family=queue_consumer_count [3.10.8]
RABBIT_SERIES = {
    "rabbitmq_detailed_queue_messages_ready",
    "rabbitmq_detailed_queue_messages_unacked",
    "rabbitmq_detailed_queue_messages",
    "rabbitmq_detailed_queue_consumers",
}


def worker_series() -> set[str]:
    metrics = WorkerMetrics(["acme"])
    metrics.track_in_flight(lambda: {"acme": 0})
    metrics.track_endpoint_states(lambda: {"acme": ("closed", "active")})
    # Labelled histograms and gauges have series only once observed
    metrics.observe(AttemptRecord("acme", "evt", 1, 200, None, 0.01, "delivered", None, 0.5, None))
    text = generate_latest(metrics.registry).decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def expressions() -> list[str]:
    rules = yaml.safe_load((ROOT / "ops/prometheus/alerts.yml").read_text())["groups"][0]["rules"]
    dashboard = json.loads((ROOT / "ops/grafana/warren.json").read_text())
    return [r["expr"] for r in rules] + [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_alert_rules_are_complete() -> None:
    rules = yaml.safe_load((ROOT / "ops/prometheus/alerts.yml").read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {"WarrenDeadLettersWaiting", "WarrenCircuitOpen", "WarrenDeliveriesOld"} <= names
    for rule in rules:
        assert rule["expr"].strip() and rule["labels"]["severity"] and rule["annotations"]["summary"]
    assert next(r for r in rules if r["alert"] == "WarrenCircuitOpen")["for"] == "10m"


def test_every_metric_named_exists() -> None:
    known = worker_series()
    used_warren = {name for expr in expressions() for name in WARREN_NAME.findall(expr)}
    used_rabbit = {name for expr in expressions() for name in RABBIT_NAME.findall(expr)}
    assert used_warren and used_warren <= known, used_warren - known
    assert used_rabbit and used_rabbit <= RABBIT_SERIES, used_rabbit - RABBIT_SERIES


def _rules() -> list[dict[str, object]]:
    rules: list[dict[str, object]] = yaml.safe_load((ROOT / "ops/prometheus/alerts.yml").read_text())["groups"][0][
        "rules"
    ]
    return rules


# Which family of /metrics/detailed each series comes from [3.10.8]
RABBIT_FAMILY = {
    "rabbitmq_detailed_queue_messages_ready": "queue_coarse_metrics",
    "rabbitmq_detailed_queue_messages_unacked": "queue_coarse_metrics",
    "rabbitmq_detailed_queue_messages": "queue_coarse_metrics",
    "rabbitmq_detailed_queue_consumers": "queue_consumer_count",
}


def test_the_scrape_setting_in_the_header_asks_for_every_family_the_rules_use() -> None:
    # Given the scrape setting the header of alerts.yml tells operators to use
    text = (ROOT / "ops/prometheus/alerts.yml").read_text()
    header = text[: text.index("groups:")]
    asked = set(re.findall(r"family=([a-z_]+)", header))
    # Then every RabbitMQ series a rule reads comes from a family it asks for (else the rule can never fire)
    used = {name for rule in _rules() for name in RABBIT_NAME.findall(str(rule["expr"]))}
    assert "rabbitmq_detailed_queue_consumers" in used
    assert {RABBIT_FAMILY[name] for name in used} <= asked, {RABBIT_FAMILY[name] for name in used} - asked
    # And the docs' scrape_configs ask for the same families under the same job names
    docs = (ROOT / "docs/operations.md").read_text()
    assert "family: [queue_coarse_metrics, queue_consumer_count]" in docs
    assert 'job "warren-workers"' in header and "job_name: warren-workers" in docs


def test_a_dead_worker_is_caught() -> None:
    rule = next(r for r in _rules() if r["alert"] == "WarrenWorkerDown")
    assert rule["expr"] == 'up{job="warren-workers"} == 0'
    assert rule["for"] and rule["labels"] == {"severity": "critical"}


def test_kubernetes_manifest_probes_the_worker_and_api_it_configures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warren.topology.config import load_config

    documents = list(yaml.safe_load_all((ROOT / "ops/kubernetes/warren.yaml").read_text()))
    by_name = {d["metadata"]["name"]: d for d in documents if d["kind"] != "Service"}
    (tmp_path / "warren.toml").write_text(by_name["warren-config"]["data"]["warren.toml"])
    for name, value in {"WARREN_API_TOKEN": "t" * 32, "ACME_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}.items():
        monkeypatch.setenv(name, value)
    nodes = [f"amqps://warren:pw@rabbit-{i}.rabbit:5671/prod" for i in range(3)]
    monkeypatch.setenv("WARREN_BROKER__URL", json.dumps(nodes))
    config = load_config(tmp_path / "warren.toml")  # the shipped configuration is valid
    assert len(config.broker.urls) == 3
    for deployment, port in (("warren-worker", config.worker.metrics_port), ("warren-api", config.api.port)):
        (container,) = by_name[deployment]["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert ports[container["readinessProbe"]["httpGet"]["port"]] == port
        assert container["args"][0] == deployment.removeprefix("warren-")
    assert by_name["warren-setup"]["spec"]["template"]["spec"]["containers"][0]["args"][0] == "setup"


def test_systemd_unit_runs_the_worker_with_a_stop_timeout_above_the_grace_period() -> None:
    from warren.topology.settings import DeliverySettings

    unit = (ROOT / "ops/systemd/warren-worker@.service").read_text()
    settings = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert " worker --config " in settings["ExecStart"]
    assert float(settings["TimeoutStopSec"]) > DeliverySettings().grace_period
    assert "LimitNOFILE=" in (ROOT / "ops/systemd/rabbitmq-server.override.conf").read_text()
