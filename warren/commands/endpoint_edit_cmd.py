"""``warren endpoint create|update|delete|rotate-secret|secret|public-keys|test``: endpoints as live data, in the
store.

The same operations as the admin API (warren/broker/admin/service.py), run from the command line: each one is
applied to RabbitMQ and to every running worker, then stored. Needs ``[store] url`` and the store's key.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer
from rich.markup import escape

from warren.common import EXIT_USAGE, ConfigOption, command_line, console, fail, json_option, load, run
from warren.topology.durations import parse_duration

if TYPE_CHECKING:  # the store's libraries load when a command runs, not with the CLI
    from warren.api.admin.service import EndpointService
    from warren.topology.config import WarrenConfig
    from warren.topology.signing_keys import Scheme

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
        "while lanes are on; update: kept unless given (a move; an ordered endpoint moves onto the lanes only).",
    ),
]
PartitionsOption = Annotated[int | None, typer.Option("--partitions", min=1, max=256, help="With --ordering key.")]
ConcurrencyOption = Annotated[int | None, typer.Option("--concurrency", min=1, max=2048, help="Requests per worker.")]
TimeoutOption = Annotated[str | None, typer.Option("--timeout", help="Request timeout, e.g. 10s.")]
RateOption = Annotated[float | None, typer.Option("--rate-limit", help="Requests per second, fleet-wide.")]
InFlightOption = Annotated[int | None, typer.Option("--max-in-flight", help="Concurrent requests, fleet-wide.")]
HeaderOption = Annotated[
    list[str] | None,
    typer.Option("--header", "-H", help="'Name: value' sent with every POST (repeat for more; update: replaces all)."),
]
SecretHeaderOption = Annotated[
    list[str] | None,
    typer.Option(
        "--secret-header",
        help="'Name: value' kept secret: sealed in the store, shown as ***; the value may be env:NAME (repeat).",
    ),
]
ProxyOption = Annotated[
    str | None, typer.Option("--proxy", help="A proxy of [delivery.proxies] by name, or 'direct' for none.")
]
SigningOption = Annotated[
    list[str] | None,
    typer.Option("--signing", help="'hmac' (v1) or 'ed25519' (v1a): a scheme that signs (repeat for both)."),
]
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


def _headers(plain: list[str] | None, secret: list[str] | None) -> dict[str, Any] | None:
    """``--header`` and ``--secret-header`` as the endpoint's ``headers`` table; None when neither is given."""
    if not plain and not secret:
        return None
    from warren.topology.endpoint_headers import parse_header_line

    table: dict[str, Any] = {}
    try:
        for line in plain or ():
            name, value = parse_header_line(line)
            table[name] = value
        for line in secret or ():
            name, value = parse_header_line(line)
            table[name] = {"value": value, "secret": True}
    except ValueError as exc:
        fail(f"--header: {exc}", EXIT_USAGE)
    return table


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
    secret: Annotated[
        str | None, typer.Option("--secret", help="A whsec_ secret or whsk_ key (default: new ones, per --signing).")
    ] = None,
    signing: SigningOption = None,
    home: HomeOption = None,
    ordering: OrderingOption = None,
    partitions: PartitionsOption = None,
    concurrency: ConcurrencyOption = None,
    timeout: TimeoutOption = None,
    rate_limit: RateOption = None,
    max_in_flight: InFlightOption = None,
    header: HeaderOption = None,
    secret_header: SecretHeaderOption = None,
    proxy: ProxyOption = None,
    filter_json: FilterOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create an endpoint: stored, declared on RabbitMQ and served by every worker; prints its secret once."""
    settings = load(config)
    data = _options(
        name=name, url=url, events=events, secret=secret, signing=signing, home=home, ordering=ordering,
        partitions=partitions, concurrency=concurrency, timeout=timeout, rate_limit=rate_limit,
        max_in_flight=max_in_flight, headers=_headers(header, secret_header), proxy=proxy,
        filter=None if filter_json is None else json_option("--filter", filter_json),
    )  # fmt: skip
    stored, texts = _with_service(settings, lambda service: service.create(data, tenant=tenant))
    from warren.api.admin.key_choice import shown_keys

    keys = shown_keys(texts)
    if as_json:
        typer.echo(json.dumps({**stored.fields(), **keys}, indent=2))
        return
    owner = f" for tenant {escape(stored.tenant)}" if stored.tenant else ""
    _say(f"{escape(stored.name)}: created{owner} (home {stored.home}), applied to RabbitMQ and the workers")
    if stored.options.get("filter"):
        _say(f"  filter  {escape(json.dumps(stored.options['filter']))}")
    _show_keys(keys, command_line("endpoint", "secret", stored.name, config=config))


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
    header: HeaderOption = None,
    secret_header: SecretHeaderOption = None,
    no_headers: Annotated[bool, typer.Option("--no-headers", help="Send no headers of its own any more.")] = False,
    proxy: ProxyOption = None,
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
        timeout=timeout, rate_limit=rate_limit, max_in_flight=max_in_flight, proxy=proxy,
        headers=_headers(header, secret_header),
        filter=None if filter_json is None else json_option("--filter", filter_json),
    )  # fmt: skip
    if no_headers:
        if "headers" in changes:
            fail("--no-headers and --header exclude each other", EXIT_USAGE)
        changes["headers"] = None
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
    secret: Annotated[
        str | None, typer.Option("--secret", help="The new whsec_ secret or whsk_ key (default: a new one).")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="'ed25519': a new Ed25519 key (default: hmac); its scheme's keys rotate."),
    ] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give an endpoint a new signing secret; the old one of its scheme keeps signing beside it for the grace period."""
    settings = load(config)
    try:
        seconds = None if grace is None else parse_duration(grace)
    except ValueError as exc:
        fail(f"--grace: {exc}", EXIT_USAGE)
    if kind not in (None, "hmac", "ed25519"):
        fail("--kind is 'hmac' or 'ed25519'", EXIT_USAGE)
    scheme = cast("Scheme | None", kind)  # checked just above
    rotated = _with_service(settings, lambda service: service.rotate(name, secret=secret, grace=seconds, kind=scheme))
    from warren.api.admin.key_choice import shown_keys

    stored, keys = rotated[0], shown_keys([rotated[1]])
    if as_json:
        expiring = [s.expires_at for s in stored.secrets if s.expires_at is not None]
        typer.echo(json.dumps({"name": name, **keys, "previous_expire_at": expiring}, indent=2))
        return
    _say(f"{escape(name)}: new {'Ed25519 key' if keys['public_key'] else 'secret'}, signing from now on")
    _show_keys(keys, command_line("endpoint", "secret", name, config=config))
    if any(s.expires_at is not None for s in stored.secrets):
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


def _show_keys(keys: dict[str, str | None], reveal: str) -> None:
    """Keys just made: an HMAC secret (revealed again by ``reveal``), an Ed25519 key shown this once only."""
    if keys["secret"] != keys["secret_key"]:
        _say(f"  secret      {keys['secret']}")
        _say(f"  [dim](shown once; `{escape(reveal)}` reveals it again)[/]")
    if keys["secret_key"]:
        _say(f"  secret key  {keys['secret_key']}")
        _say("  [dim](the Ed25519 secret key: shown this once, never again; it is sealed in the store)[/]")
        _say(f"  public key  {keys['public_key']}  [dim](give it to the receiver: it verifies v1a signatures)[/]")


def public_keys(name: NameArgument, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Print an endpoint's Ed25519 public keys (whpk_), which verify its v1a signatures: safe to publish."""
    settings = load(config)
    keys = _with_service(settings, lambda service: service.public_keys(name))
    if as_json:
        typer.echo(json.dumps([{"public_key": k.public_key, "expires_at": k.expires_at} for k in keys], indent=2))
        return
    if not keys:
        _say(f"{escape(name)}: no Ed25519 key (it signs with HMAC only)")
    for key in keys:
        _say(f"{key.public_key}" + ("" if key.expires_at is None else "  (rotated out, signs until its grace ends)"))


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
    endpoint_app.command("public-keys")(public_keys)
    endpoint_app.command("test")(test)
