"""The configuration sections for the broker, retries, delivery, the ingest API, the worker and circuits."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BeforeValidator, Field, PlainSerializer, SecretStr, create_model, field_validator, model_validator
from pydantic.fields import FieldInfo

from warren.topology.config_fields import Duration, EventPattern, PositiveDuration, _Frozen, _guessable
from warren.topology.proxies import DIRECT, PROXY_NAME, ProxyUrl
from warren.topology.secrets import API_TOKENS, UnresolvedText, resolve_or_defer, revealed


class BrokerSettings(_Frozen):
    """Where RabbitMQ is, and how Warren names and types what it declares there."""

    # Both URLs may hold a password: kept out of repr (and so out of logged configs and tracebacks). Either is
    # one node's URL or a list of a cluster's nodes (``urls`` and ``management_urls`` always give the list).
    url: NodeUrls = Field(default="amqp://guest:guest@127.0.0.1:5672/%2F", repr=False)
    management_url: NodeUrls = Field(default="http://guest:guest@127.0.0.1:15672", repr=False)
    management_user: str | None = None
    management_password: str | None = Field(default=None, repr=False)
    prefix: str = "warren"
    queue_type: Literal["quorum", "classic"] = "quorum"

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_token(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,30}", value):
            raise ValueError("prefix is a short token: lowercase letters, digits, '-' and '_'")
        return value

    @field_validator("url")
    @classmethod
    def _amqp_url(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        urls = _listed(value, "url")
        if any(urlsplit(url).scheme not in ("amqp", "amqps") for url in urls):
            raise ValueError("url must be an amqp:// or amqps:// URL (or a list of them, one per cluster node)")
        if len({_vhost_of(url) for url in urls}) > 1:
            raise ValueError("the nodes listed in url must name the same vhost (they are one cluster)")
        return value

    @field_validator("management_url")
    @classmethod
    def _http_url(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        if any(urlsplit(url).scheme not in ("http", "https") for url in _listed(value, "management_url")):
            raise ValueError("management_url must be an http:// or https:// URL (or a list of them)")
        return value

    @property
    def urls(self) -> tuple[str, ...]:
        """The AMQP URL of every node, in the order configured (connections shuffle it: warren/broker/nodes.py)."""
        return (self.url,) if isinstance(self.url, str) else self.url

    @property
    def management_urls(self) -> tuple[str, ...]:
        return (self.management_url,) if isinstance(self.management_url, str) else self.management_url

    @property
    def vhost(self) -> str:
        return _vhost_of(self.urls[0])

    def management_credentials(self) -> tuple[str, str]:
        """User and password for the management API: explicit fields first, then the (first) URL, then guest."""
        parts = urlsplit(self.management_urls[0])
        user = self.management_user or (unquote(parts.username) if parts.username else "guest")
        password = self.management_password or (unquote(parts.password) if parts.password else "guest")
        return user, password

    def management_base(self) -> str:
        """The (first) management API's base URL without credentials."""
        return self.management_bases()[0]

    def management_bases(self) -> tuple[str, ...]:
        """Every node's management API base URL without credentials, in the order configured."""
        return tuple(_without_credentials(url) for url in self.management_urls)


# One node's URL, or a list of a cluster's nodes (a TOML array, or WARREN_BROKER__URL='["amqp://...", ...]').
NodeUrls = str | tuple[str, ...]


def _listed(value: str | tuple[str, ...], field: str) -> tuple[str, ...]:
    urls = (value,) if isinstance(value, str) else value
    if not urls:
        raise ValueError(f"{field} lists no node: give one URL or a list of at least one")
    return urls


def _vhost_of(url: str) -> str:
    path = urlsplit(url).path
    return unquote(path[1:]) if len(path) > 1 else "/"


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


class RetryPolicy(_Frozen):
    """When to try again: exponential ``min(cap, base * factor^(n-1))`` or an explicit schedule, jittered."""

    base: PositiveDuration = 2.0
    factor: float = Field(default=2.0, ge=1.0)
    cap: PositiveDuration = 3600.0
    max_attempts: int = Field(default=10, ge=1, le=1000)
    max_age: PositiveDuration = 3 * 86400.0
    jitter: Literal["full", "none"] = "full"
    schedule: tuple[PositiveDuration, ...] | None = None

    @field_validator("schedule")
    @classmethod
    def _schedule_not_empty(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is not None and not value:
            raise ValueError("schedule needs at least one delay, or leave it out to use base/factor/cap")
        return value

    @property
    def longest_delay(self) -> float:
        """The largest delay this policy can ask for (the delay topology must reach it)."""
        return max(self.schedule) if self.schedule else self.cap


class _RetryOverrideBase(_Frozen):
    """Per-endpoint changes to the global retry policy; fields left out keep the global value."""

    def apply_to(self, policy: RetryPolicy) -> RetryPolicy:
        return RetryPolicy.model_validate(
            {**policy.model_dump(), **self.model_dump(exclude_none=True, exclude_unset=True)}
        )


def _overrides_of(policy: type[RetryPolicy]) -> type[_RetryOverrideBase]:
    """Every field of ``policy``, optional (None keeps the global value), with the same constraints."""
    fields: dict[str, Any] = {}
    for name, info in policy.model_fields.items():
        annotation: Any = info.annotation
        fields[name] = (annotation | None, FieldInfo.merge_field_infos(info, default=None))
    return create_model("RetryOverride", __base__=_RetryOverrideBase, __module__=__name__, **fields)


# Derived, so that a field added to RetryPolicy can be overridden per endpoint without repeating it here.
if TYPE_CHECKING:
    RetryOverride = _RetryOverrideBase
else:
    RetryOverride = _overrides_of(RetryPolicy)


# RabbitMQ refuses a larger message: 4.0's default max_message_size is 16 MiB (3.10's is 128 MiB). Warren's
# own headers ride outside the body, so a payload up to this size fits on every supported version.
MAX_PAYLOAD_CAP = 16 * 1024 * 1024


class DeliverySettings(_Frozen):
    """How the worker talks HTTP to endpoints."""

    allow_private_networks: bool = False
    max_payload: int = Field(
        default=256 * 1024,
        ge=1024,
        le=MAX_PAYLOAD_CAP,
        description="bytes of envelope, at publish and POST (at most 16 MiB: RabbitMQ 4.x's max_message_size)",
    )
    response_body_limit: int = Field(default=2048, ge=0, description="bytes of a response kept for the log")
    grace_period: Duration = 10.0
    ordered_hold_limit: PositiveDuration = 25 * 60.0
    user_agent: str = "Warren-Webhooks/0.1"
    max_handbacks: int = Field(
        default=1000, ge=1, description="times a message may be handed back to its queue before it is dead-lettered"
    )
    # Egress proxies (warren/topology/proxies.py): literal or 'env:NAME', hidden like secrets.
    proxy: ProxyUrl | None = Field(default=None, repr=False, description="every endpoint's POSTs go through it")
    proxies: dict[str, ProxyUrl] = Field(default={}, repr=False, description="named proxies (endpoint proxy = NAME)")

    @field_validator("proxies")
    @classmethod
    def _proxy_names(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name in value:
            if name == DIRECT or not PROXY_NAME.fullmatch(name):
                raise ValueError(f"{name!r}: a proxy's name is a token (lowercase, digits, '-', '_'), not {DIRECT!r}")
        return value


def _resolve_token(value: object) -> object:
    if not isinstance(value, str):
        return value
    text = resolve_or_defer(value, API_TOKENS)  # a command that serves no API loads without it
    if isinstance(text, UnresolvedText):
        return text
    weak = _guessable(text, "an API token")
    if weak or len(text) < 16:
        raise ValueError(weak or "an API token needs at least 16 characters")
    return text


# Hidden in repr and str; revealed in JSON dumps like endpoint secrets, so a dumped config can be reloaded.
ApiToken = Annotated[
    SecretStr,
    BeforeValidator(_resolve_token),
    PlainSerializer(revealed, when_used="json"),
]


def _database_url(value: str | None, key: str) -> str | None:
    if value is not None and urlsplit(value).scheme not in ("sqlite", "postgresql", "postgres"):
        raise ValueError(f"{key} is sqlite:///PATH or a postgresql:// DSN")
    return value


class _ServerLimits(_Frozen):
    """How slow a client of an HTTP server may be, and how many may be connected (slowloris)."""

    header_timeout: PositiveDuration = Field(default=10.0, description="to send a request head (408 after)")
    body_timeout: PositiveDuration = Field(default=30.0, description="to send a request body (408 after)")
    max_connections: int = Field(default=512, ge=1, description="open connections; more are answered 503")


class PortalSettings(_Frozen):
    """``[portal]``: the tenants' endpoint portal ``warren api`` serves at ``/portal`` with the admin API."""

    enabled: bool = Field(default=True, description="serve /portal (with the admin API: store.url, admin tokens)")
    title: str = Field(default="Webhooks", min_length=1, max_length=100, description="the page's heading")
    logo_url: str | None = Field(default=None, max_length=2000, description="an https:// (or /) image shown beside it")
    accent_color: str = Field(default="#1d4ed8", pattern=r"^#[0-9a-fA-F]{6}$", description="buttons and links")
    frame_ancestors: tuple[str, ...] = Field(
        default=(), description="origins that may show it in an iframe (CSP frame-ancestors); none: only its own"
    )

    @field_validator("logo_url")
    @classmethod
    def _image_url(cls, value: str | None) -> str | None:
        if value is not None and not (value.startswith("https://") or value.startswith("/")):
            raise ValueError("logo_url is an https:// URL or a path on the API's own origin")
        return value

    @field_validator("frame_ancestors")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if not re.fullmatch(r"https://[A-Za-z0-9.*-]+(:[0-9]{1,5})?", origin):
                raise ValueError(f"{origin!r}: an origin such as https://app.example.com (https, no path)")
        return value


class ApiSettings(_ServerLimits):
    """The HTTP ingest API (``warren api``): where it listens, who may call it, what it accepts."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    tokens: tuple[ApiToken, ...] = Field(default=(), repr=False, description="bearer tokens: literal or 'env:NAME'")
    admin_tokens: tuple[ApiToken, ...] = Field(
        default=(), repr=False, description="bearer tokens of the admin API (/v1/endpoints): literal or 'env:NAME'"
    )
    max_batch: int = Field(default=500, ge=1, le=10_000, description="events in one POST /v1/events/batch")
    max_body: int = Field(default=4 * 1024 * 1024, ge=1024, description="bytes of one request body")
    allowed_event_types: tuple[EventPattern, ...] | None = None
    publish_timeout: PositiveDuration = 10.0
    retry_after: int = Field(default=5, ge=1, le=3600, description="seconds, sent with every 503")
    idempotency_store: str | None = Field(default=None, description="sqlite:///PATH or postgresql://...")
    idempotency_retention: PositiveDuration = 24 * 3600.0

    @field_validator("idempotency_store")
    @classmethod
    def _idempotency_store_url(cls, value: str | None) -> str | None:
        return _database_url(value, "idempotency_store")


class WorkerSettings(_Frozen):
    """The worker process: logs, metrics, and how it spreads ordered partitions."""

    log_format: Literal["text", "json"] = "text"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_header_timeout: PositiveDuration = 10.0
    metrics_max_connections: int = Field(default=64, ge=1)
    metrics_lane_endpoints: Literal["each", "by-lane"] = "each"  # a lane endpoint's series: its own, or its lane's
    rebalance_interval: PositiveDuration = 5.0
    state_refresh_interval: PositiveDuration = 3600.0  # re-append endpoint-state records in force (docs/health.md)
    # The attempt log (docs/configuration.md): each attempt published as a record on {prefix}.attempts, in batches
    # of ``attempt_log_batch`` or every ``attempt_log_interval``. None (the default): on when [store] url is set,
    # since the writer that stores the records runs in `warren api` with the store; off otherwise.
    attempt_log: bool | None = None
    attempt_log_batch: int = Field(default=200, ge=1, le=10_000)
    attempt_log_interval: PositiveDuration = 0.25
    attempt_log_buffer: int = Field(default=50_000, ge=1)  # records kept while RabbitMQ is away; the oldest go first


class LaneSettings(_Frozen):
    """Shared lanes (docs/architecture.md, "Lanes"): endpoints with ``home = "lane"`` share ``count`` quorum
    queues instead of owning their own. ``count = 0`` (the default) turns lanes off."""

    count: int = Field(default=0, ge=0, le=1024, description="lanes (quorum queues shared by lane endpoints); 0: off")
    prefetch: int = Field(default=64, ge=1, le=10_000, description="messages a worker holds unacked per lane")
    route_prefetch: int = Field(default=64, ge=1, le=10_000, description="events the routing stage holds at once")
    inline: bool = Field(
        default=True,
        description="the routing stage makes a healthy lane endpoint's first attempt itself, with no copy in its lane",
    )
    apply_wait: Duration = Field(
        default=2.0,
        ge=0,
        le=60,
        description="seconds a live lane endpoint's create waits for every running router to have it in its index",
    )
    promote_wait: Duration = Field(
        default=30.0,
        gt=0,
        le=600,
        description="seconds a lane endpoint's promotion waits for the routing stage to route what it held before",
    )
    # An event whose copies could not all be stored is routed again (warren/consumers/route_attempts.py): through
    # the delay chain after route_retry_delay, doubling each time (at most a minute), and to {prefix}.route.dlq
    # once route_attempts attempts failed. Warren counts them in a header, never spending a delivery limit.
    route_attempts: int = Field(default=10, ge=1, le=1000, description="routing attempts before the route DLQ")
    route_retry_delay: PositiveDuration = 1.0
    # The routing stage's input is partitioned by key (docs/architecture.md, "Routing partitioned by key"), and
    # ordered lane endpoints share their own lanes, consumed one owner at a time (single active consumer).
    route_partitions: int = Field(
        default=4, ge=1, le=256, description="route partitions (consistent hash of warren-key), claimed by routers"
    )
    ordered_count: int = Field(
        default=4, ge=1, le=1024, description="ordered lanes (single active consumer) for ordered lane endpoints"
    )
    api_default_home: Literal["lane", "dedicated"] = Field(
        default="lane", description="the home of an endpoint created at runtime without one (with count > 0)"
    )

    def default_home(self, ordering: str = "none") -> Literal["lane", "dedicated"]:
        """The home of an endpoint created at runtime (the admin API, ``warren endpoint create``) that names none.

        ``api_default_home`` while lanes are on (ordered endpoints too: they go to the ordered lanes);
        ``dedicated`` when they are off (there is no lane to share).
        """
        if self.count == 0:
            return "dedicated"
        return self.api_default_home


class CircuitSettings(_Frozen):
    """An endpoint's circuit breaker: when it opens, how long it waits, how delivery resumes (docs/health.md).

    It opens after ``consecutive_failures`` failed attempts in a row, or when at least ``min_requests`` attempts
    in the last ``window`` failed at ``failure_ratio`` or more. Open, the endpoint's queues are not consumed;
    after ``cooldown`` (times ``cooldown_factor`` per failed probe, at most ``cooldown_max``) one probe
    delivery tests it; success closes it, and concurrency ramps up from ``ramp_start``, doubling per success.
    Open longer than ``disable_after``, the endpoint is disabled until ``warren endpoint enable``.
    """

    enabled: bool = True
    consecutive_failures: int = Field(default=20, ge=1)
    failure_ratio: float | None = Field(default=0.5, gt=0, le=1)
    window: PositiveDuration = 30.0
    min_requests: int = Field(default=40, ge=1)
    cooldown: PositiveDuration = 5.0
    cooldown_factor: float = Field(default=2.0, ge=1.0)
    cooldown_max: PositiveDuration = 300.0
    ramp_start: int = Field(default=1, ge=1)
    disable_after: PositiveDuration = 5 * 86400.0

    @model_validator(mode="after")
    def _cooldown_bounds(self) -> CircuitSettings:
        if self.cooldown_max < self.cooldown:
            raise ValueError("cooldown_max must be at least cooldown")
        return self


class StoreSettings(_Frozen):
    """The endpoint store behind the admin API (docs/endpoints.md): where it is and how its secrets are sealed.

    ``keys`` are Fernet keys (``warren store generate-key``), literal or ``env:NAME``, resolved when the store
    is opened, by live apply (it seals the secrets it announces) and by a worker (it opens them; it needs no
    store, and serves only the file's endpoints without a usable key): the first encrypts, every one decrypts.
    """

    url: str | None = Field(default=None, description="sqlite:///PATH or postgresql://...; unset: no store")
    keys: tuple[str, ...] = Field(default=("env:WARREN_STORE_KEY",), repr=False, min_length=1)
    migrate: bool = Field(default=True, description="bring the schema up to date when the store is opened")
    secret_grace: PositiveDuration = Field(
        default=24 * 3600.0, description="how long a rotated-out secret keeps signing beside the new one"
    )
    attempt_retention: PositiveDuration = Field(
        default=7 * 86400.0, description="how long the attempt log keeps a delivery attempt (docs/endpoints.md)"
    )

    @field_validator("url")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        return _database_url(value, "store.url")
