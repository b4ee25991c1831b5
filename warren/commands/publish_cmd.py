"""``warren publish``: one event from flags, or many from a JSON-lines file, each confirmed by RabbitMQ."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from warren.broker.publish_deadline import DEFAULT_DEADLINE
from warren.common import EXIT_USAGE, ConfigOption, console, err_console, fail, json_option, load, progress_bar, run
from warren.core.errors import EventError, PublishError

if TYPE_CHECKING:  # the publisher (aio-pika, OpenTelemetry) and the configuration load to publish, not for --help
    from warren.broker.events import Event
    from warren.topology.config import WarrenConfig

T = TypeVar("T")


async def _in_callers_trace(work: Coroutine[Any, Any, T]) -> T:
    """``work`` in the trace of the process that started this one, when it set ``TRACEPARENT`` (docs/tracing.md)."""
    from warren.tracing.carry import attached, environment_context

    with attached(environment_context()):
        return await work


async def _publish_one(config: WarrenConfig, event: Event, deadline: float) -> None:
    from warren.broker.amqp.connection import connect
    from warren.broker.publisher import Publisher

    connection = await connect(config.broker.urls, name="warren-publish")
    try:
        publisher = await Publisher.open(
            connection, config.broker.prefix, max_payload=config.delivery.max_payload, catalog=config.event_catalog()
        )
        await publisher.publish(event, deadline=deadline)
    finally:
        await connection.close()
    for_tenant = f" for tenant {event.tenant}" if event.tenant else ""
    console.print(f"published {event.id} ({event.type}){for_tenant}", highlight=False)


async def _publish_file(config: WarrenConfig, source: str, deadline: float) -> int:
    from warren.broker.amqp.connection import connect
    from warren.broker.event_lines import BadLine, aread_event_lines
    from warren.broker.publisher import Publisher
    from warren.core.deadlines import stop_if_cancelled
    from warren.core.line_stream import stream_lines

    # Read by a thread (warren/core/line_stream.py): a line on a live pipe is published as soon as it arrives.
    stream = sys.stdin.buffer if source == "-" else Path(source).open("rb")  # noqa: SIM115, ASYNC230
    bad: list[BadLine] = []
    failed: list[tuple[str, PublishError]] = []
    confirmed = 0
    connection = await connect(config.broker.urls, name="warren-publish")
    try:
        publisher = await Publisher.open(
            connection, config.broker.prefix, max_payload=config.delivery.max_payload, catalog=config.event_catalog()
        )
        with progress_bar("publishing", transient=False) as progress:
            task = progress.add_task("publish", total=None)

            async def events() -> AsyncIterator[Event]:
                async for item in aread_event_lines(stream_lines(stream)):
                    stop_if_cancelled()  # Ctrl-C, even when a library lost its CancelledError (warren/deadlines.py)
                    if isinstance(item, BadLine):
                        bad.append(item)
                        err_console.print(f"line {item.line}: {item.reason}", highlight=False)
                    else:
                        yield item

            def done(event_id: str, error: PublishError | None) -> None:
                progress.advance(task)
                if error is not None:
                    err_console.print(f"event {event_id}: {error}", highlight=False)

            report = await publisher.publish_many(events(), on_result=done, deadline=deadline)
            confirmed = len(report.confirmed)
            failed = report.failed
    finally:
        await connection.close()
        if stream is not sys.stdin.buffer:
            stream.close()
    console.print(
        f"published {confirmed} event(s); {len(failed)} not stored; {len(bad)} bad line(s)"
        + (f" (lines {', '.join(str(b.line) for b in bad[:20])}{'…' if len(bad) > 20 else ''})" if bad else ""),
        highlight=False,
    )
    return 0 if not bad and not failed else 1


def publish(
    config: ConfigOption = None,
    event_type: Annotated[str | None, typer.Option("--type", "-t", help="Event type (the routing key).")] = None,
    data: Annotated[str | None, typer.Option("--data", "-d", help="Event data as JSON.")] = None,
    event_id: Annotated[
        str | None, typer.Option("--id", help="Event id (becomes webhook-id); generated if absent.")
    ] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Ordering key.")] = None,
    sequence: Annotated[int | None, typer.Option("--sequence", help="Producer sequence number.")] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Publish for this tenant: only its endpoints receive the event.")
    ] = None,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="JSON-lines file of events; '-' reads standard input.")
    ] = None,
    deadline: Annotated[
        float,
        typer.Option(
            "--deadline",
            min=0,
            help="Seconds an event that was not confirmed (a node failing over) is sent again, same id, before it "
            "is reported as not stored; 0 sends once.",
        ),
    ] = DEFAULT_DEADLINE,
) -> None:
    """Publish events (for a tenant with --tenant); each is confirmed by RabbitMQ or reported."""
    from warren.broker.event_lines import event_from_fields
    from warren.tracing.sdk import process_tracing

    cfg = load(config)
    if file is not None:
        if event_type or data or event_id or key or sequence is not None or tenant is not None:
            fail("--file cannot be combined with --type/--data/--id/--key/--sequence/--tenant", EXIT_USAGE)
        if file != "-" and not Path(file).is_file():
            fail(f"--file {file}: no such file", EXIT_USAGE)
        with process_tracing("warren-publish"):
            raise typer.Exit(run(_in_callers_trace(_publish_file(cfg, file, deadline))))
    if not event_type or data is None:
        fail("give --type and --data (JSON), or --file PATH", EXIT_USAGE)
    parsed = json_option("--data", data)
    try:
        fields = {
            "type": event_type,
            "data": parsed,
            "id": event_id,
            "key": key,
            "sequence": sequence,
            "tenant": tenant,
        }
        event = event_from_fields(fields)
    except EventError as exc:
        fail(str(exc), EXIT_USAGE)
    with process_tracing("warren-publish"):
        run(_in_callers_trace(_publish_one(cfg, event, deadline)))


def register(app: typer.Typer) -> None:
    app.command("publish")(publish)
