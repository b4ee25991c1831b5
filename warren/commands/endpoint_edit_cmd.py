"""``warren endpoint create|update|delete|rotate-secret|secret|test``: endpoints as live data, in the store.

The same operations as the admin API (warren/broker/admin/service.py), run from the command line: each one is
applied to RabbitMQ and to every running worker, then stored. Needs ``[store] url`` and the store's key.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape

from warren.common import EXIT_USAGE, ConfigOption, command_line, console, fail, json_option, load, run
from warren.topology.config import WarrenConfig
from warren.topology.durations import parse_duration

if TYPE_CHECKING:  # the store's libraries load when a command runs, not with the CLI
    from warren.api.admin.service import EndpointService

__all__ = ["register"]

T = TypeVar("T")

NameArgument = Annotated[str, typer.Argument(help="Endpoint name.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
UrlOption = Annotated[str | None, typer.Option("--url", help="Where events are POSTed (http:// or https://).")]
EventsOption = Annotated[
    list[str] | None, typer.Option("--event", "-e", help="Event-type pattern to subscribe to (repeat for more).")
]
TenantOption = Annotated[str | None, typer.Option("--tenant", "-t", help="The customer it belongs to.")]
OrderingOption = Annotated[str | None, typer.Option("--ordering", help="'none' or 'key' (in order per event key).")]
HomeOption = Annotated[
    str | None,
    typer.Option(
        "--home",
        help="'lane' (shares [lanes]) or 'dedicated' (queues of its own). create: default [lanes] api_default_home "
        "while lanes are on; update: kept unless given (a move, refused where it is not built).",
    ),
]
PartitionsOption = Annotated[int | None, typer.Option("--partitions", min=1, max=256, help="With --ordering key.")]
ConcurrencyOption = Annotated[int | None, typer.Option("--concurrency", min=1, max=2048, help="Requests per worker.")]
TimeoutOption = Annotated[str | None, typer.Option("--timeout", help="Request timeout, e.g. 10s.")]
RateOption = Annotated[float | None, typer.Option("--rate-limit", help="Requests per second, fleet-wide.")]
InFlightOption = Annotated[int | None, typer.Option("--max-in-flight", help="Concurrent requests, fleet-wide.")]
FilterOption = Annotated[
    str | None,
    typer.Option(
        "--filter",
        help='Only events whose data match this JSON filter, e.g. \'{"amount": {"$gt": 1000}, "region": "eu"}\' '
        "(docs/endpoints.md, Payload filters).",
    ),
]


def _with_service(settings: WarrenConfig, action: Callable[[EndpointService], Awaitable[T]]) -> T:
    if settings.store.url is None:
        fail("no endpoint store configured: set [store] url (docs/endpoints.md)", EXIT_USAGE)

    from warren.api.admin.service import open_service

    async def go() -> T:
        async with open_service(settings) as service:
            return await action(service)

    return run(go())


def _options(**given: Any) -> dict[str, Any]:
    return {key: value for key, value in given.items() if value is not None}


def delivered(result: Any) -> bool:
    from warren.api.admin.service import delivered as was_delivered

    return was_delivered(result)


def _say(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True)


def create(
    name: NameArgument,
    url: Annotated[str, typer.Option("--url", help="Where events are POSTed (http:// or https://).")],
    events: Annotated[list[str], typer.Option("--event", "-e", help="Event-type pattern (repeat for more).")],
    tenant: TenantOption = None,
    secret: Annotated[str | None, typer.Option("--secret", help="A whsec_ secret (default: a new one).")] = None,
    home: HomeOption = None,
    ordering: OrderingOption = None,
    partitions: PartitionsOption = None,
    concurrency: ConcurrencyOption = None,
    timeout: TimeoutOption = None,
    rate_limit: RateOption = None,
    max_in_flight: InFlightOption = None,
    filter_json: FilterOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an endpoint: stored, declared on RabbitMQ and served by every worker; prints its secret once."""
    settings = load(config)
    data = _options(
        name=name, url=url, events=events, secret=secret, home=home, ordering=ordering, partitions=partitions,
        concurrency=concurrency, timeout=timeout, rate_limit=rate_limit, max_in_flight=max_in_flight,
        filter=None if filter_json is None else json_option("--filter", filter_json),
    )  # fmt: skip
    stored, text = _with_service(settings, lambda service: service.create(data, tenant=tenant))
    if as_json:
        typer.echo(json.dumps({**stored.fields(), "secret": text}, indent=2))
        return
    owner = f" for tenant {escape(stored.tenant)}" if stored.tenant else ""
    _say(f"{escape(stored.name)}: created{owner} (home {stored.home}), applied to RabbitMQ and the workers")
    if stored.options.get("filter"):
        _say(f"  filter  {escape(json.dumps(stored.options['filter']))}")
    _say(f"  secret  {text}")
    again = escape(command_line("endpoint", "secret", stored.name, config=config))
    _say(f"  [dim](shown once; `{again}` reveals it again)[/]")


def update(
    name: NameArgument,
    url: UrlOption = None,
    events: EventsOption = None,
    tenant: TenantOption = None,
    no_tenant: Annotated[bool, typer.Option("--no-tenant", help="Make it a platform endpoint.")] = False,
    home: HomeOption = None,
    ordering: OrderingOption = None,
    partitions: PartitionsOption = None,
    concurrency: ConcurrencyOption = None,
    timeout: TimeoutOption = None,
    rate_limit: RateOption = None,
    max_in_flight: InFlightOption = None,
    filter_json: FilterOption = None,
    no_filter: Annotated[bool, typer.Option("--no-filter", help="Remove its payload filter.")] = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change an endpoint's fields; applied to RabbitMQ and the workers, then stored."""
    settings = load(config)
    if tenant is not None and no_tenant:
        fail("--tenant and --no-tenant exclude each other", EXIT_USAGE)
    changes = _options(
        url=url, events=events, home=home, ordering=ordering, partitions=partitions, concurrency=concurrency,
        timeout=timeout, rate_limit=rate_limit, max_in_flight=max_in_flight,
        filter=None if filter_json is None else json_option("--filter", filter_json),
    )  # fmt: skip
    if no_filter:
        if filter_json is not None:
            fail("--filter and --no-filter exclude each other", EXIT_USAGE)
        changes["filter"] = None  # back to the default: every event of its subscription
    new_tenant: str | bool | None = None if no_tenant else (tenant if tenant is not None else False)
    if not changes and new_tenant is False:
        listing = command_line("endpoint", "update", "--help")
        fail(f"nothing to change: give at least one option (`{listing}` lists them)", EXIT_USAGE)
    stored = _with_service(settings, lambda service: service.update(name, changes, tenant=new_tenant))
    if as_json:
        typer.echo(json.dumps(stored.fields(), indent=2))
        return
    _say(f"{escape(stored.name)}: updated (version {stored.version}), applied to RabbitMQ and the workers")


def delete(
    name: NameArgument,
    force: Annotated[
        bool,
        typer.Option("--force", help="Even when it holds messages: its queued events and dead letters are discarded."),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Stop delivering to an endpoint and remove it with its queues and DLQ (only when empty, unless --force)."""
    settings = load(config)
    removal = _with_service(settings, lambda service: service.delete(name, force=force))
    discarded = (
        f"; discarded {removal.queued} queued event(s) and {removal.dead_letters} dead letter(s)"
        if removal.discarded
        else ""
    )
    _say(f"{escape(name)}: deleted, with its queues and dead-letter queue{discarded}")


def rotate_secret(
    name: NameArgument,
    grace: Annotated[
        str | None, typer.Option("--grace", help="How long the old secret keeps signing (default: store.secret_grace).")
    ] = None,
    secret: Annotated[str | None, typer.Option("--secret", help="The new whsec_ secret (default: a new one).")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give an endpoint a new signing secret; the old one keeps signing beside it for the grace period."""
    settings = load(config)
    try:
        seconds = None if grace is None else parse_duration(grace)
    except ValueError as exc:
        fail(f"--grace: {exc}", EXIT_USAGE)
    stored, text = _with_service(settings, lambda service: service.rotate(name, secret=secret, grace=seconds))
    if as_json:
        expiring = [s.expires_at for s in stored.secrets if s.expires_at is not None]
        typer.echo(json.dumps({"name": name, "secret": text, "previous_expire_at": expiring}, indent=2))
        return
    _say(f"{escape(name)}: new secret, signing from now on")
    _say(f"  secret  {text}")
    if len(stored.secrets) > 1:
        _say("  [dim]the previous secret keeps signing beside it until its grace period ends[/]")


def reveal(name: NameArgument, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Reveal an endpoint's signing secrets (every one that signs, newest first). Keep them out of logs."""
    settings = load(config)
    secrets = _with_service(settings, lambda service: service.reveal(name))
    if as_json:
        typer.echo(json.dumps([{"secret": s.text, "expires_at": s.expires_at} for s in secrets], indent=2))
        return
    for secret in secrets:
        _say(secret.text + ("" if secret.expires_at is None else "  (rotated out, signs until its grace period ends)"))


def test(
    name: NameArgument,
    event_type: Annotated[str, typer.Option("--type", help="The test event's type.")] = "warren.test",
    data: Annotated[str | None, typer.Option("--data", help="The test event's data, as JSON.")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send a signed test event to the endpoint now and print what came of it (exit 1 when not delivered)."""
    settings = load(config)
    payload = None if data is None else json_option("--data", data)
    outcome = _with_service(settings, lambda service: service.test(name, event_type, payload))
    result = outcome.result
    if as_json:
        typer.echo(json.dumps({
            "event_id": outcome.event_id, "delivered": delivered(result), "outcome": result.outcome.value,
            "status": result.status, "duration_ms": round(result.duration * 1000, 3), "error": result.error,
        }, indent=2))  # fmt: skip
    else:
        verdict = "[green]delivered[/]" if delivered(result) else f"[red]not delivered[/] ({escape(result.reason)})"
        _say(f"{escape(name)}: {verdict} · {outcome.event_id} · {result.duration * 1000:.0f} ms")
    if not delivered(result):
        raise typer.Exit(1)


def register(endpoint_app: typer.Typer) -> None:
    endpoint_app.command("create")(create)
    endpoint_app.command("update")(update)
    endpoint_app.command("delete")(delete)
    endpoint_app.command("rotate-secret")(rotate_secret)
    endpoint_app.command("secret")(reveal)
    endpoint_app.command("test")(test)
