"""`warren topology show` and `warren topology export` on the shipped examples (no broker needed)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import warren_sync as warren

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.toml"
EXAMPLE = ROOT / "examples" / "warren.toml"


def test_show_prints_the_tree_of_the_demo() -> None:
    # Given the demo configuration (3 endpoints, one ordered with 8 partitions)
    # When `topology show` runs with its output piped
    result = warren("topology", "show", "--config", str(DEMO))
    # Then the tree names every endpoint's objects, one per line
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "vhost '/' · prefix 'demo' · quorum queues" in out.splitlines()[0]
    for expected in (
        "message.* → demo.ep.acme (fanout)",
        "demo.ep.acme.q — work  [quorum, dead-letters to demo.dead [acme], at-least-once, limit 2^31-1]",
        "demo.ep.billing (x-consistent-hash)  hash on header warren-key",
        "demo.ep.billing.p07 — partition 7  [quorum, dead-letters to demo.dead [billing], "
        "at-least-once, limit 2^31-1, single-active-consumer]",
        "# → demo.ep.audit (fanout)",
        "audit → demo.ep.audit.dlq — dead letters  [quorum, limit 2^31-1]",
        "delay chain: 16 levels",  # lanes on: the chain reaches at least a minute for parks and routing retries
    ):
        assert expected in out, expected
    assert "demo.ep.billing.p08" not in out


def test_export_writes_definitions_json_to_stdout_or_a_file(tmp_path: Path) -> None:
    # Given the example file and the variable its env: secret names
    env = {"ACME_WEBHOOK_SECRET": "whsec_C2FtcGxlU2VjcmV0Rm9yV2FycmVuRGVtbzE="}
    # When exported to stdout and to a file
    stdout = warren("topology", "export", "--config", str(EXAMPLE), env=env)
    target = tmp_path / "defs.json"
    to_file = warren("topology", "export", "--config", str(EXAMPLE), "--output", str(target), env=env)
    # Then both hold the same definitions document, for the broker URL's vhost
    assert stdout.returncode == 0 and to_file.returncode == 0, stdout.stderr + to_file.stderr
    document = json.loads(stdout.stdout)
    assert json.loads(target.read_text()) == document
    assert f"wrote {target}" in to_file.stderr
    assert {q["vhost"] for q in document["queues"]} == {"/"}
    names = {q["name"] for q in document["queues"]}
    assert {"warren.ep.acme.q", "warren.ep.billing.p07", "warren.ep.billing.dlq"} <= names
    assert "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" not in stdout.stdout


def test_export_vhost_option_and_unwritable_output(tmp_path: Path) -> None:
    result = warren("topology", "export", "--config", str(DEMO), "--vhost", "staging")
    assert result.returncode == 0
    assert json.loads(result.stdout)["vhosts"] == [{"name": "staging"}]
    failed = warren("topology", "export", "--config", str(DEMO), "--output", str(tmp_path / "no" / "such" / "x.json"))
    assert failed.returncode == 1
    assert "cannot write" in failed.stderr and "Traceback" not in failed.stderr
