"""Every command a CLI hint prints runs as printed: ``warren setup``'s, ``warren endpoint``'s (the attempt log's
next page is in test_attempts_cmd.py). Each hint names the --config the command was given, and the test's
working directory has no warren.toml, so a hint without it would fail."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_STORE_KEY
from tests.support.cli import hinted, run_hinted, warren
from tests.support.processes import write_config
from tests.support.setup_helpers import prefix_state
from tests.support.topology import declare
from tests.warren.test_endpoint_edit_cmd import applier
from warren.broker.management import ManagementClient
from warren.cli import app
from warren.common import command_line
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["applier"]

pytestmark = pytest.mark.timeout(120)

CLASSIC = {"queue_type": "classic"}  # light on a broker that other test runs share; the hints are the same


def endpoint(name: str, **more: object) -> dict[str, object]:
    return {"name": name, "url": f"http://127.0.0.1:9/{name}", "events": ["order.*"], **more}


def test_no_warren_toml_where_the_hints_run() -> None:
    assert not Path("warren.toml").exists(), "the hints below would find it without their --config"


async def test_a_dry_runs_hint_applies_it_and_a_leftovers_hint_prunes_them(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, tmp_path: Path
) -> None:
    # Given a configuration of two endpoints, dry-run
    config = make_config([endpoint("shop"), endpoint("books")], broker=CLASSIC)
    path = write_config(tmp_path, config)
    prefix = config.broker.prefix
    dry = await warren("setup", "--config", str(path), "--dry-run")
    assert dry.code == 0, dry.err
    # When its hint runs as printed
    applied = await run_hinted(hinted(dry.out, "would be created; "))
    # Then it applied the plan
    assert applied.code == 0, applied.err
    assert "Done" in applied.out
    assert names.work_queue(prefix, "books") in (await prefix_state(management, prefix)).queues
    # Given one endpoint removed from the file: setup reports its queues as leftovers and suggests pruning them
    write_config(tmp_path, make_config([endpoint("shop")], broker=CLASSIC))
    again = await warren("setup", "--config", str(path))
    assert again.code == 0, again.err
    # When that hint runs as printed
    pruned = await run_hinted(hinted(again.out, " deletes them"))
    assert pruned.code == 0, pruned.err
    # Then the leftovers are gone
    assert names.work_queue(prefix, "books") not in (await prefix_state(management, prefix)).queues


async def test_a_large_plans_hint_lists_each_object(make_config: Callable[..., WarrenConfig], tmp_path: Path) -> None:
    # Given a plan too large to list object by object (a dry run: nothing is declared)
    config = make_config([endpoint("many", ordering="key", partitions=128)], broker=CLASSIC)
    path = write_config(tmp_path, config)
    dry = await warren("setup", "--config", str(path), "--dry-run")
    assert dry.code == 0, dry.err
    # When the hint that replaces the list runs as printed
    listed = await run_hinted(hinted(dry.out, " lists each"))
    # Then it lists them
    assert listed.code == 0, listed.err
    assert names.partition_queue(config.broker.prefix, "many", 127) in listed.out


async def test_the_secret_hint_of_a_created_endpoint_reveals_it(
    make_config: Callable[..., WarrenConfig], tmp_path: Path, applier: object
) -> None:
    # Given a deployment with a store (the workers' side stood in: the hint is what is tested)
    config = make_config(store={"url": f"sqlite:///{tmp_path / 'store.sqlite3'}", "keys": [TEST_STORE_KEY]})
    path = write_config(tmp_path, config)
    c = ("--config", str(path))
    # When an endpoint is created, and the hint under its secret runs as printed
    created = await asyncio.to_thread(
        CliRunner().invoke, app, ["endpoint", "create", "acme", "--url", "http://127.0.0.1:9/a", "-e", "order.*", *c]
    )
    assert created.exit_code == 0, created.output
    secret = next(line.split()[1] for line in created.output.splitlines() if line.strip().startswith("secret "))
    revealed = await run_hinted(hinted(created.output, "reveals it again"))
    # Then it prints that secret
    assert revealed.code == 0, revealed.err
    assert revealed.out.strip() == secret
    # And an update with nothing to change points at the options, in a command that runs
    nothing = await warren("endpoint", "update", "acme", *c)
    assert nothing.code == 2
    options = await run_hinted(hinted(nothing.err, "nothing to change"))
    assert options.code == 0 and "--concurrency" in options.out


async def test_a_disabled_endpoints_refusals_name_the_enable_that_runs(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    # Given a disabled endpoint
    config = make_config([endpoint("acme")], broker=CLASSIC)
    await declare(config)
    c = ("--config", str(write_config(tmp_path, config)))
    assert (await warren("endpoint", "disable", "acme", *c)).code == 0
    # When it is paused, or resumed: refused, each naming the command that applies
    paused = await warren("endpoint", "pause", "acme", *c)
    resumed = await warren("endpoint", "resume", "acme", *c)
    assert paused.code == 1 and resumed.code == 1, (paused.err, resumed.err)
    assert hinted(paused.err, "first") == hinted(resumed.err, "not paused")
    # Then that command runs as printed, and enables it
    enabled = await run_hinted(hinted(paused.err, "first"))
    assert enabled.code == 0 and "acme: enabled" in enabled.out, enabled.err


def test_a_hint_is_quoted_for_the_shell_and_names_the_given_configuration() -> None:
    line = command_line("attempts", "--endpoint", "a b", "--cursor", "x=", config=Path("my dir/warren.toml"))
    assert line == "warren attempts --endpoint 'a b' --cursor x= --config 'my dir/warren.toml'"
    assert command_line("topology", "show") == "warren topology show"
