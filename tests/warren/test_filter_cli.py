"""Payload filters from the command line: `warren endpoint create|update --filter`, `endpoint show`, `topology
show`, and a bad filter in the file or an option refused naming its place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.admin.conftest import StandInApplier
from tests.support.cli import warren_sync
from tests.support.store import store_postgres, store_url
from tests.warren.test_endpoint_edit_cmd import applier, cli, config_file

__all__ = ["applier", "config_file", "store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(120)

BIG_EU = {"amount": {"$gt": 1000}, "region": "eu"}


async def test_create_show_update_and_remove_a_filter(config_file: Path, applier: StandInApplier) -> None:
    c = ("--config", str(config_file))
    # When an endpoint is created with a filter
    created = await cli("endpoint", "create", "big", "--url", "http://127.0.0.1:9/big", "-e", "order.*",
                        "--filter", json.dumps(BIG_EU), *c)  # fmt: skip
    # Then it is applied with it, and the command says so
    assert created.exit_code == 0, created.output
    assert f"filter  {json.dumps(BIG_EU)}" in created.output
    assert applier.applied[-1].filter is not None and applier.applied[-1].filter.source == BIG_EU
    # And `endpoint show` prints it, in text and JSON
    shown = await cli("endpoint", "show", "big", *c)
    assert shown.exit_code == 0, (shown.output, shown.exception)
    assert f"filter    {json.dumps(BIG_EU)}" in shown.output
    as_json = await cli("endpoint", "show", "big", *c, "--json")
    assert json.loads(as_json.output)["filter"] == BIG_EU
    # When another is given, and then none
    updated = await cli("endpoint", "update", "big", "--filter", '{"region": {"$in": ["eu", "uk"]}}', *c, "--json")
    assert updated.exit_code == 0, updated.output
    assert json.loads(updated.output)["options"]["filter"] == {"region": {"$in": ["eu", "uk"]}}
    removed = await cli("endpoint", "update", "big", "--no-filter", *c, "--json")
    assert removed.exit_code == 0 and "filter" not in json.loads(removed.output)["options"], removed.output
    assert applier.applied[-1].filter is None
    # And a bad one is refused naming its place, changing nothing
    applied = len(applier.applied)
    bad = await cli("endpoint", "update", "big", "--filter", '{"amount": {"$gte": "1"}, "x": {"$exists": true}}', *c)
    assert bad.exit_code != 0 and "filter: x.$exists: unknown operator $exists" in bad.output, bad.output
    not_json = await cli("endpoint", "create", "other", "--url", "http://127.0.0.1:9/o", "-e", "#",
                         "--filter", "amount > 1000", *c)  # fmt: skip
    assert not_json.exit_code == 2 and "--filter is not JSON" in not_json.output, not_json.output
    both = await cli("endpoint", "update", "big", "--filter", "{}", "--no-filter", *c)
    assert both.exit_code == 2 and "exclude each other" in both.output
    assert len(applier.applied) == applied


FILE = """
[broker]
prefix = "filters"

[lanes]
count = 2

[[endpoints]]
name = "big-orders"
url = "https://hooks.example/big"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
events = ["order.paid"]
filter = { amount = { "$gt" = 1000 }, region = "eu" }

[[endpoints]]
name = "eu-lane"
url = "https://hooks.example/eu"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
events = ["order.*"]
home = "lane"
filter = { "$or" = [{ region = "eu" }, { "customer.country" = { "$in" = ["FR", "DE"] } }] }

[[endpoints]]
name = "everything"
url = "https://hooks.example/all"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
events = ["#"]
"""


def test_topology_show_lists_the_files_filters(tmp_path: Path) -> None:
    config = tmp_path / "warren.toml"
    config.write_text(FILE, encoding="utf-8")
    result = warren_sync("topology", "show", "--config", str(config))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Payload filters"))
    assert lines[start + 1 :] == [
        '  big-orders (dedicated): {"amount": {"$gt": 1000}, "region": "eu"}',
        '  eu-lane (lane): {"$or": [{"region": "eu"}, {"customer.country": {"$in": ["FR", "DE"]}}]}',
    ]


def test_a_bad_filter_in_the_file_is_refused_naming_the_endpoint_and_the_place(tmp_path: Path) -> None:
    config = tmp_path / "warren.toml"
    config.write_text(FILE.replace('"$gt" = 1000', '"$gt" = true'), encoding="utf-8")
    result = warren_sync("topology", "show", "--config", str(config))
    assert result.returncode == 2, result.stdout
    assert "endpoints[0] ('big-orders').filter: amount.$gt: takes a number or a string, not a boolean" in result.stderr
    assert "Traceback" not in result.stderr
