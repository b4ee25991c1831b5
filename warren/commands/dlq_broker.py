"""What ``warren dlq`` does on RabbitMQ: read a DLQ (after checking its delivery limit), replay it client-side or by
a shovel, count it. Imported when a ``dlq`` command runs (aio-pika, the management API's aiohttp), not for its
``--help`` (warren/commands/dlq_cmd.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from aio_pika.abc import AbstractConnection
from rich.progress import Progress

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, connect_once
from warren.broker.amqp.probe import QueueProbe, missing
from warren.broker.dlq import (
    MAX_SCAN,
    DeadLetter,
    Selection,
    browse,
    delivery_limit,
    dlq_route,
    move_selected,
    replay_by_shovel,
)
from warren.broker.dlq.shovel import shovel_name_stem
from warren.broker.management import ManagementClient
from warren.commands.dlq_render import moves_table, type_counts
from warren.common import command_line, console, err_console, fail, progress_bar
from warren.core.errors import BrokerUnavailable, ManagementError, TopologyError
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import DELIVERY_LIMIT

__all__ = [
    "dlq_depth",
    "guard_delivery_limit",
    "read_letters",
    "replay_all",
    "replay_filtered",
    "replay_progress",
    "scan_note",
    "with_broker",
]

T = TypeVar("T")


async def with_broker(config: WarrenConfig, work: Callable[[AbstractConnection], Awaitable[T]]) -> T:
    """Run ``work`` on a fresh connection; a link lost half-way becomes one clear line, not a traceback."""
    connection = await connect_once(config.broker.urls, name="warren-dlq")
    try:
        return await work(connection)
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(f"connection to RabbitMQ lost: {exc or type(exc).__name__}") from exc
    finally:
        await connection.close()


async def guard_delivery_limit(config: WarrenConfig, queue: str, path: Path | None) -> None:
    """Refuse to read a DLQ whose delivery limit is below Warren's: every read counts as a delivery there.

    Warren's own limit (2^31-1) cannot run out by reading (warren/broker/dlq/browse.py); a lower one can.
    """
    try:
        async with ManagementClient.from_settings(config.broker) as api:
            limit = await delivery_limit(api, queue)
    except ManagementError as exc:
        err_console.print(f"note: could not check {queue} for a delivery limit ({exc})", highlight=False)
        return
    if limit is not None and limit < DELIVERY_LIMIT:
        fail(
            f"{queue} has a delivery limit of {limit} (its argument, a policy, or RabbitMQ 4.x's default): each "
            "read returns every message once and counts as a delivery, so reading it would eventually drop "
            f"messages. Run `{command_line('setup', config=path)}` (it gives Warren's queues a limit of 2^31-1), "
            "and remove any lower delivery-limit policy that matches the DLQ."
        )


async def read_letters(
    config: WarrenConfig, endpoint: str, scan: int, path: Path | None, lanes: int = 0
) -> tuple[list[DeadLetter], int]:
    queue = dlq_route(config.broker.prefix, endpoint, lanes)[0]
    await guard_delivery_limit(config, queue, path)
    return await with_broker(config, lambda c: browse(c, queue, scan=scan))


def scan_note(read: int, depth: int) -> str:
    return f" (only the first {read} of {depth} were read: add --scan {min(depth, MAX_SCAN)})" if read < depth else ""


def replay_progress() -> Progress:
    # Piped or captured: the final line says it all.
    return progress_bar("replaying", transient=True, disable=not err_console.is_terminal)


async def replay_filtered(
    config: WarrenConfig,
    endpoint: str,
    selection: Selection,
    newest: bool,
    dry_run: bool,
    scan: int,
    path: Path | None,
    lanes: int = 0,
) -> None:
    prefix = config.broker.prefix
    queue, exchange, lane = dlq_route(prefix, endpoint, lanes)
    await guard_delivery_limit(config, queue, path)
    with replay_progress() as progress:
        task = progress.add_task("replay", total=None)

        async def work(connection: AbstractConnection) -> tuple[int, int, list[DeadLetter], int]:
            report = await move_selected(
                connection,
                prefix,
                endpoint,
                selection,
                newest_first=newest,
                dry_run=dry_run,
                scan=scan,
                on_moved=lambda _: progress.advance(task),
                lanes=lanes,
            )
            return report.depth, report.scanned, report.chosen, report.moved

        if dry_run:
            progress.update(task, visible=False)
        depth, scanned, chosen, moved = await with_broker(config, work)
        progress.update(task, total=len(chosen))
    exchange = lane or exchange
    if dry_run:
        console.print(moves_table(chosen, f"would replay to {exchange}", console.width))
        console.print(
            f"dry run: {len(chosen)} of {depth} dead letter(s) would be replayed client-side"
            + (f" ({type_counts(chosen)})" if chosen else "")
            + scan_note(scanned, depth),
            highlight=False,
        )
        return
    console.print(
        f"replayed {moved} dead letter(s) of {endpoint} to {exchange} (client-side, each confirmed before its DLQ "
        f"copy was removed); {depth - moved} left in {queue}{scan_note(scanned, depth)}",
        highlight=False,
    )


async def replay_all(config: WarrenConfig, endpoint: str, dry_run: bool, timeout: float, path: Path | None) -> None:
    prefix = config.broker.prefix
    queue = names.dlq(prefix, endpoint)
    exchange = names.endpoint_exchange(prefix, endpoint)
    if dry_run:
        await guard_delivery_limit(config, queue, path)
        letters, depth = await with_broker(config, lambda c: browse(c, queue))
        console.print(
            f"dry run: {depth} dead letter(s) would be moved from {queue} to {exchange} by a shovel "
            f"{shovel_name_stem(prefix, endpoint)}.<run id>" + (f" ({type_counts(letters)})" if letters else ""),
            highlight=False,
        )
        return
    async with ManagementClient.from_settings(config.broker) as api:
        with replay_progress() as progress:
            task = progress.add_task("replay", total=None)

            def advance(moved: int, total: int) -> None:
                progress.update(task, completed=moved, total=total)

            report = await with_broker(
                config, lambda c: replay_by_shovel(c, api, prefix, endpoint, timeout=timeout, on_progress=advance)
            )
    if report.moved == 0 and not report.resumed:
        console.print(f"nothing to replay: {queue} is empty", highlight=False)
        return
    how = "an earlier run's shovel, watched to its end," if report.resumed else "a shovel"
    console.print(
        f"replayed {report.moved} dead letter(s) of {endpoint} from {queue} to {exchange} through {how} "
        f"in {report.seconds:.1f}s; shovel {report.name} removed; {report.remaining} in the "
        "DLQ now",
        highlight=False,
    )


async def dlq_depth(config: WarrenConfig, endpoint: str) -> int:
    queue = dlq_route(config.broker.prefix, endpoint)[0]

    async def depth(connection: AbstractConnection) -> int:
        probe = QueueProbe(connection)
        try:
            found = await probe.depth(queue)
        finally:
            await probe.close()
        if found is None:
            raise TopologyError(missing("queue", queue))
        return found.ready

    return await with_broker(config, depth)
