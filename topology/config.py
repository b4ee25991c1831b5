"""Warren's configuration: frozen pydantic models loaded from one TOML file, overridable from the environment.

Precedence, highest first: environment (``WARREN_`` prefix, ``__`` between levels, e.g. ``WARREN_BROKER__URL``),
then the TOML file. Defaults live on the fields below and nowhere else.
"""

from __future__ import annotations

import os
import re
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from warren.topology.addresses import connect_host, literal_problem, url_host_problem
from warren.topology.durations import parse_duration
from warren.topology.env_overrides import override_problems, override_variables
from warren.topology.errors import WarrenError
from warren.topology.redact import redact_urls
from warren.topology.secrets import (
    ENV_REFERENCE,
    SecretError,
    SigningSecrets,
    UnresolvedSecrets,
    WebhookSecret,
    resolve_secret_text,
)

__all__ = [
    "ApiSettings",
    "BrokerSettings",
    "CircuitSettings",
    "ConfigError",
    "DeliverySettings",
    "Endpoint",
    "InboundSource",
    "InboxSettings",
    "ReceiverSettings",
    "RetryOverride",
    "RetryPolicy",
    "WarrenConfig",
    "WorkerSettings",
    "load_config",
]

CONFIG_ENV = "WARREN_CONFIG"
DEFAULT_CONFIG_FILE = "warren.toml"

Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_PATTERN_WORD = re.compile(r"^(?:\*|#|[A-Za-z0-9_\-:/]+)$")


# False while a command that signs nothing loads the configuration (see load_config's signing_secrets).
_RESOLVE_SIGNING_SECRETS: ContextVar[bool] = ContextVar("warren_resolve_signing_secrets", default=True)


def _parse_secrets(value: object) -> SigningSecrets:
    if isinstance(value, SigningSecrets):
        return value
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not all(isinstance(t, str) for t in texts):
        raise ValueError("secret is a 'whsec_...' string, an 'env:NAME' reference, or a list of them")
    try:
        for text in texts:  # a literal's mistake is the file's: reported whoever loads it
            if not text.startswith(ENV_REFERENCE):
                WebhookSecret(text)
        try:
            return SigningSecrets(tuple(WebhookSecret(resolve_secret_text(t)) for t in texts))
        except SecretError as exc:
            if _RESOLVE_SIGNING_SECRETS.get():
                raise
            return UnresolvedSecrets(tuple(texts), str(exc))
    except SecretError as exc:
        raise ValueError(str(exc)) from None


def _dump_secrets(secrets: SigningSecrets) -> list[str]:
    if isinstance(secrets, UnresolvedSecrets):
        return list(secrets.references)
    return [x.reveal() for x in secrets]


Secrets = Annotated[
    SigningSecrets,
    PlainValidator(_parse_secrets),
    PlainSerializer(_dump_secrets, when_used="json"),
]


def _check_event_pattern(pattern: str) -> str:
    words = pattern.split(".")
    if not pattern or not all(_PATTERN_WORD.fullmatch(w) for w in words):
        raise ValueError(
            f"{pattern!r} is not an event-type pattern: dot-separated words, '*' for one word, '#' for any"
        )
    return pattern


EventPattern = Annotated[str, AfterValidator(_check_event_pattern)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BrokerSettings(_Frozen):
    """Where RabbitMQ is, and how Warren names and types what it declares there."""

    # Both URLs may hold a password: kept out of repr (and so out of logged configs and tracebacks).
    url: str = Field(default="amqp://guest:guest@127.0.0.1:5672/%2F", repr=False)
    management_url: str = Field(default="http://guest:guest@127.0.0.1:15672", repr=False)
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
    def _amqp_url(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("amqp", "amqps"):
            raise ValueError("url must be an amqp:// or amqps:// URL")
        return value

    @property
    def vhost(self) -> str:
        path = urlsplit(self.url).path
        return unquote(path[1:]) if len(path) > 1 else "/"

    def management_credentials(self) -> tuple[str, str]:
        """User and password for the management API: explicit fields first, then the URL, then guest."""
        parts = urlsplit(self.management_url)
        user = self.management_user or (unquote(parts.username) if parts.username else "guest")
        password = self.management_password or (unquote(parts.password) if parts.password else "guest")
        return user, password

    def management_base(self) -> str:
        """The management API's base URL without credentials."""
        parts = urlsplit(self.management_url)
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


def _guessable(text: str, what: str) -> str | None:
    """Why a shared secret is too weak to use: under 16 bytes of UTF-8, or nothing but whitespace."""
    if not text.strip():
        return f"{what} cannot be whitespace only"
    if len(text.encode()) < 16:
        return f"{what} needs at least 16 bytes"
    return None


def _resolve_token(value: object) -> object:
    if not isinstance(value, str):
        return value
    try:
        text = resolve_secret_text(value)
    except SecretError as exc:
        raise ValueError(str(exc)) from None
    weak = _guessable(text, "an API token")
    if weak or len(text) < 16:
        raise ValueError(weak or "an API token needs at least 16 characters")
    return text


# Hidden in repr and str; revealed in JSON dumps like endpoint secrets, so a dumped config can be reloaded.
ApiToken = Annotated[
    SecretStr,
    BeforeValidator(_resolve_token),
    PlainSerializer(lambda s: s.get_secret_value(), when_used="json"),
]


class _ServerLimits(_Frozen):
    """How slow a client of an HTTP server may be, and how many may be connected (slowloris)."""

    header_timeout: PositiveDuration = Field(default=10.0, description="to send a request head (408 after)")
    body_timeout: PositiveDuration = Field(default=30.0, description="to send a request body (408 after)")
    max_connections: int = Field(default=512, ge=1, description="open connections; more are answered 503")


class ApiSettings(_ServerLimits):
    """The HTTP ingest API (``warren api``): where it listens, who may call it, what it accepts."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    tokens: tuple[ApiToken, ...] = Field(default=(), repr=False, description="bearer tokens: literal or 'env:NAME'")
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
        if value is not None and urlsplit(value).scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("idempotency_store is sqlite:///PATH or a postgresql:// DSN")
        return value


class WorkerSettings(_Frozen):
    """The worker process: logs, metrics, and how it spreads ordered partitions."""

    log_format: Literal["text", "json"] = "text"
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_header_timeout: PositiveDuration = 10.0
    metrics_max_connections: int = Field(default=64, ge=1)
    rebalance_interval: PositiveDuration = 5.0


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


class Endpoint(_Frozen):
    """A subscriber: where events go, how they are signed, which ones, and in what order."""

    name: str
    url: str
    secret: Secrets = Field(repr=False)
    events: tuple[EventPattern, ...] = Field(min_length=1)
    ordering: Literal["none", "key"] = "none"
    partitions: int | None = Field(default=None, ge=1, le=256)
    concurrency: int = Field(default=16, ge=1, le=2048)
    timeout: PositiveDuration = 10.0
    connect_timeout: PositiveDuration = 3.0
    retry: RetryOverride | None = None
    retry_statuses: tuple[int, ...] = Field(
        default=(), description="extra 4xx statuses to retry instead of dead-lettering (e.g. 404, 409)"
    )
    # Endpoint health (docs/health.md): the circuit breaker, and limits that hold across the whole fleet.
    circuit: CircuitSettings = CircuitSettings()
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000, description="concurrent requests, fleet-wide")
    rate_limit: float | None = Field(default=None, gt=0, description="requests per second, fleet-wide")
    burst: int | None = Field(default=None, ge=1, description="requests above the rate at once (default: 1 s worth)")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("name is a token of lowercase letters, digits, '-' and '_' (at most 63)")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an absolute http:// or https:// URL")
        try:
            problem = literal_problem(connect_host(value))
        except ValueError as exc:  # yarl refuses the host (e.g. an IDNA error)
            problem = f"the host cannot be used: {redact_urls(str(exc))}"
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("retry_statuses")
    @classmethod
    def _client_errors(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 400 <= s <= 499 for s in value):
            raise ValueError("retry_statuses holds 4xx statuses (5xx always retry)")
        return value

    @model_validator(mode="after")
    def _partitions_match_ordering(self) -> Endpoint:
        if self.ordering == "none" and self.partitions not in (None, 1):
            raise ValueError("partitions applies only to ordering = 'key'")
        if self.burst is not None and self.rate_limit is None:
            raise ValueError("burst applies only with a rate_limit")
        return self

    @property
    def partition_count(self) -> int:
        if self.ordering == "none":
            return 1
        return self.partitions if self.partitions is not None else 4

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        return self.retry.apply_to(default) if self.retry else default


def _parse_plain_secrets(value: object) -> tuple[SecretStr, ...]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list | tuple) or not texts or not all(isinstance(t, str | SecretStr) for t in texts):
        raise ValueError("secret is a string, an 'env:NAME' reference, or a non-empty list of them")
    resolved: list[SecretStr] = []
    for text in texts:
        if isinstance(text, SecretStr):
            resolved.append(text)
            continue
        try:
            plain = resolve_secret_text(text)
        except SecretError as exc:
            raise ValueError(str(exc)) from None
        if not plain:
            raise ValueError("a secret cannot be empty")
        resolved.append(SecretStr(plain))
    return tuple(resolved)


def _strong_plain_secrets(value: tuple[SecretStr, ...] | None) -> tuple[SecretStr, ...] | None:
    """hmac-sha256 and token secrets are guessed or brute-forced when short: the same floor as API tokens."""
    for secret in value or ():
        weak = _guessable(secret.get_secret_value(), "a secret")
        if weak:
            raise ValueError(weak)
    return value


PlainSecrets = Annotated[
    tuple[SecretStr, ...],
    PlainValidator(_parse_plain_secrets),
    PlainSerializer(lambda s: [x.get_secret_value() for x in s], when_used="json"),
]

_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_HEADER = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class InboundSource(_Frozen):
    """A provider whose webhooks Warren receives: how to check them, where their id is, who handles them.

    ``verifier`` has no default: a source without a signature must say ``verifier = "none"`` explicitly.
    """

    name: str
    path: str | None = Field(default=None, description="URL path served by `warren receive` (default /in/<name>)")
    verifier: Literal["standard-webhooks", "hmac-sha256", "token", "none"]
    secret: PlainSecrets | None = Field(default=None, repr=False, description="several during a rotation")
    header: str | None = Field(default=None, description="the signature (hmac-sha256) or token (token) header")
    encoding: Literal["hex", "base64"] = "hex"
    signature_prefix: str = Field(default="", description="text before the digest, e.g. 'sha256=' for GitHub")
    tolerance: PositiveDuration = 300.0
    id_header: str | None = None
    id_field: str | None = Field(default=None, description="dotted path into the JSON body, e.g. 'update_id'")
    key_field: str | None = None
    sequence_field: str | None = None
    handler: str = Field(description="'module:function' called once per distinct event")
    retry: RetryOverride | None = None
    max_body: int = Field(default=1024 * 1024, ge=1, description="bytes of one request body")

    @field_validator("name")
    @classmethod
    def _source_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("name is a token of lowercase letters, digits, '-' and '_' (at most 63)")
        return value

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or any(c in value for c in "{}?# ")):
            raise ValueError("path starts with '/' and holds no '{', '}', '?', '#' or spaces")
        return value

    @field_validator("header", "id_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER.fullmatch(value):
            raise ValueError(f"{value!r} is not an HTTP header name")
        return value

    @field_validator("handler")
    @classmethod
    def _module_function(cls, value: str) -> str:
        if not _HANDLER.fullmatch(value):
            raise ValueError("handler is 'package.module:function'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> InboundSource:
        if self.verifier == "none":
            if self.secret is not None:
                raise ValueError("verifier 'none' takes no secret (remove it, or choose a verifier that uses it)")
        elif self.secret is None:
            raise ValueError(f"verifier {self.verifier!r} needs a secret")
        if self.verifier == "standard-webhooks":
            try:
                for text in self.secret or ():
                    WebhookSecret(text.get_secret_value())
            except SecretError as exc:
                raise ValueError(f"secret: {exc}") from None
        if self.verifier in ("hmac-sha256", "token"):
            _strong_plain_secrets(self.secret)
        if self.verifier in ("hmac-sha256", "token") and self.header is None:
            raise ValueError(f"verifier {self.verifier!r} needs the name of its header")
        if self.id_header is not None and self.id_field is not None:
            raise ValueError("give id_header or id_field, not both")
        if self.id_header is None and self.id_field is None and self.verifier != "standard-webhooks":
            raise ValueError("id_header or id_field is needed: the event id is what deduplicates")
        return self

    @property
    def route(self) -> str:
        return self.path or f"/in/{self.name}"

    @property
    def event_id_header(self) -> str | None:
        """The header holding the event id (``webhook-id`` for Standard Webhooks unless told otherwise)."""
        if self.id_header is None and self.id_field is None:
            return "webhook-id"
        return self.id_header

    def signing_secrets(self) -> SigningSecrets:
        """The secrets as Standard Webhooks keys (only for ``verifier = "standard-webhooks"``)."""
        return SigningSecrets(tuple(WebhookSecret(s.get_secret_value()) for s in self.secret or ()))

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        return self.retry.apply_to(default) if self.retry else default


class InboxSettings(_Frozen):
    """The idempotency store of ``warren inbox`` and how long it remembers event ids."""

    store: str = Field(default="sqlite:///warren-inbox.sqlite3", description="sqlite:///PATH or postgresql://...")
    postgres_schema: str = "public"
    retention: PositiveDuration = 7 * 86400.0
    purge_interval: PositiveDuration = 60.0
    purge_batch: int = Field(default=1000, ge=1, le=100_000)
    concurrency: int = Field(default=16, ge=1, le=2048, description="events handled at once per source")

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("store is 'sqlite:///PATH' or a 'postgresql://' DSN")
        return value

    @field_validator("postgres_schema")
    @classmethod
    def _schema_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
            raise ValueError("postgres_schema is a lowercase SQL identifier")
        return value


class ReceiverSettings(_ServerLimits):
    """The verifying HTTP endpoint of ``warren receive``."""

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    publish_timeout: PositiveDuration = 5.0
    retry_after: int = Field(default=5, ge=1, le=3600, description="seconds, sent with every 503")


class WarrenConfig(BaseSettings):
    """The whole configuration of a Warren deployment."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix="WARREN_",
        env_nested_delimiter="__",
        case_sensitive=False,
    )

    broker: BrokerSettings = BrokerSettings()
    retry: RetryPolicy = RetryPolicy()
    delivery: DeliverySettings = DeliverySettings()
    worker: WorkerSettings = WorkerSettings()
    api: ApiSettings = ApiSettings()
    endpoints: tuple[Endpoint, ...] = ()
    inbound: tuple[InboundSource, ...] = ()
    inbox: InboxSettings = InboxSettings()
    receiver: ReceiverSettings = ReceiverSettings()

    @field_validator("inbound")
    @classmethod
    def _unique_sources(cls, value: tuple[InboundSource, ...]) -> tuple[InboundSource, ...]:
        names_seen: set[str] = set()
        routes: set[str] = set()
        for source in value:
            if source.name in names_seen:
                raise ValueError(f"inbound source name {source.name!r} appears twice")
            if source.route in routes:
                raise ValueError(f"inbound path {source.route!r} is used by two sources")
            names_seen.add(source.name)
            routes.add(source.route)
        return value

    @field_validator("endpoints")
    @classmethod
    def _unique_names(cls, value: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
        seen: set[str] = set()
        for endpoint in value:
            if endpoint.name in seen:
                raise ValueError(f"endpoint name {endpoint.name!r} appears twice")
            seen.add(endpoint.name)
        return value

    @model_validator(mode="after")
    def _no_private_literals(self) -> WarrenConfig:
        # What is known without DNS is refused at load; names are judged on their answers when connecting.
        if not self.delivery.allow_private_networks:
            for endpoint in self.endpoints:
                problem = url_host_problem(endpoint.url)
                if problem:
                    raise ValueError(f"endpoint {endpoint.name!r}: url refused: {problem}")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file's content arrives as init arguments; the environment must win over it.
        return (env_settings, init_settings)

    def endpoint(self, name: str) -> Endpoint:
        for endpoint in self.endpoints:
            if endpoint.name == name:
                return endpoint
        raise KeyError(name)


class ConfigError(WarrenError):
    """The configuration could not be loaded; ``str()`` is the message for the user (file, field, problem)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + ("\n  " if len(problems) > 1 else "") + "\n  ".join(problems))


def _location(loc: tuple[int | str, ...], data: dict[str, Any]) -> str:
    """``endpoints[1].url`` becomes ``endpoints[1] ("billing").url`` when the entry has a name."""
    parts: list[str] = []
    node: Any = data
    for item in loc:
        if isinstance(item, int):
            label = f"[{item}]"
            if isinstance(node, list | tuple) and item < len(node) and isinstance(node[item], dict):
                name = node[item].get("name")
                label += f" ({name!r})" if name else ""
            parts.append(label)
            node = node[item] if isinstance(node, list | tuple) and item < len(node) else None
        else:
            parts.append(("." if parts else "") + item)
            node = node.get(item) if isinstance(node, dict) else None
    return "".join(parts)


def _problems(error: ValidationError, data: dict[str, Any], overrides: dict[tuple[str, ...], str]) -> list[str]:
    """One line per validation error; a value that came from a WARREN_* variable names the variable."""
    problems = []
    for detail in error.errors(include_input=False, include_url=False):
        loc = tuple(detail["loc"])
        where = _location(loc, data)
        words = tuple(str(part).lower() for part in loc)
        variable = next((overrides[words[:n]] for n in range(len(words), 0, -1) if words[:n] in overrides), None)
        if variable is not None:
            where += f" (set by {variable})"
        message = detail["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return problems


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The file to read: ``--config``, else ``WARREN_CONFIG``, else ``./warren.toml``."""
    return Path(explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)


def load_config(path: str | os.PathLike[str] | None = None, *, signing_secrets: bool = True) -> WarrenConfig:
    """Read, merge with the environment and validate; every failure is a ConfigError naming file and field.

    ``signing_secrets=False`` is for commands that sign nothing: an endpoint's ``env:NAME`` secret whose
    variable is missing (or malformed) is then kept as UnresolvedSecrets instead of failing the load.
    """
    file = config_path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(str(file), ["file not found (give --config FILE or set WARREN_CONFIG)"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(file), [f"cannot read: {exc}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(file), [f"not valid TOML: {exc}"]) from None
    in_environment = f"{file} (with the WARREN_* environment)"
    if problems := override_problems(os.environ, WarrenConfig):
        raise ConfigError(in_environment, problems)
    overrides = {path: name for name, path in override_variables(os.environ, WarrenConfig).items()}
    resolving = _RESOLVE_SIGNING_SECRETS.set(signing_secrets)
    try:
        return WarrenConfig(**data)
    except ValidationError as exc:
        raise ConfigError(str(file), _problems(exc, data, overrides)) from None
    except SettingsError as exc:
        # A WARREN_* variable holding malformed JSON (e.g. WARREN_ENDPOINTS='[{'): the environment's fault.
        raise ConfigError(in_environment, [str(exc)]) from None
    finally:
        _RESOLVE_SIGNING_SECRETS.reset(resolving)
