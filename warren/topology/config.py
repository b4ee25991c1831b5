"""Warren's configuration: frozen pydantic models loaded from one TOML file, overridable from the environment.

Precedence, highest first: environment (``WARREN_`` prefix, ``__`` between levels, e.g. ``WARREN_BROKER__URL``),
then the TOML file. Defaults live on the models' fields and nowhere else. The sections live in siblings
(``settings``, ``inbound_config``, field types in ``config_fields``) and are re-exported here; this module holds
the endpoint, the whole ``WarrenConfig`` and its loading.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, SettingsError

from warren.core.errors import WarrenError
from warren.core.redact import redact_urls
from warren.topology.addresses import connect_host, literal_problem, url_host_problem
from warren.topology.catalog import Catalog, CatalogSettings, EventTypeSpec
from warren.topology.config_fields import (
    _NAME,
    EventPattern,
    PositiveDuration,
    Secrets,
    Tenant,
    _Frozen,
)
from warren.topology.endpoint_headers import EndpointHeaders, HeadersField
from warren.topology.env_overrides import override_problems, override_variables
from warren.topology.inbound_config import InboundSource, InboxSettings, ReceiverSettings
from warren.topology.payload_filter import PayloadFilter
from warren.topology.proxies import ProxyChoice, proxy_problem
from warren.topology.secrets import API_TOKENS, INBOUND_SECRETS, SIGNING_SECRETS, deferring
from warren.topology.settings import (
    ApiSettings,
    BrokerSettings,
    CircuitSettings,
    DeliverySettings,
    LaneSettings,
    PortalSettings,
    RetryOverride,
    RetryPolicy,
    StoreSettings,
    WorkerSettings,
)
from warren.topology.signing_keys import Signing, check_signing
from warren.topology.unknown_keys import key_hint, section_keys

__all__ = [
    "ApiSettings",
    "BrokerSettings",
    "CircuitSettings",
    "ConfigError",
    "DeliverySettings",
    "Endpoint",
    "InboundSource",
    "InboxSettings",
    "LaneSettings",
    "PortalSettings",
    "ReceiverSettings",
    "RetryOverride",
    "RetryPolicy",
    "StoreSettings",
    "WarrenConfig",
    "WorkerSettings",
    "load_config",
]

CONFIG_ENV = "WARREN_CONFIG"
DEFAULT_CONFIG_FILE = "warren.toml"


class Endpoint(_Frozen):
    """A subscriber: where events go, how they are signed, which ones, and in what order."""

    name: str
    url: str
    secret: Secrets = Field(repr=False)
    events: tuple[EventPattern, ...] = Field(min_length=1)
    tenant: Tenant | None = Field(default=None, description="receive only this tenant's events")
    all_tenants: bool = Field(default=False, description="without a tenant: also receive every tenant's events")
    filter: PayloadFilter = Field(default=None, description="only events whose data match it (docs/endpoints.md)")
    ordering: Literal["none", "key"] = "none"
    home: Literal["dedicated", "lane"] = Field(
        default="dedicated", description="dedicated: queues of its own; lane: shares [lanes] (docs/architecture.md)"
    )
    partitions: int | None = Field(default=None, ge=1, le=256)
    concurrency: int = Field(default=16, ge=1, le=2048)
    partition_prefetch: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="ordering = 'key': messages a partition holds unacked at once, shared by its keys' lanes",
    )
    timeout: PositiveDuration = 10.0
    connect_timeout: PositiveDuration = 3.0
    retry: RetryOverride | None = None
    retry_statuses: tuple[int, ...] = Field(
        default=(), description="extra 4xx statuses to retry instead of dead-lettering (e.g. 404, 409)"
    )
    headers: HeadersField = Field(default=EndpointHeaders(), description="sent with every POST (endpoint_headers.py)")
    proxy: ProxyChoice | None = Field(default=None, description="a [delivery.proxies] name or 'direct'; unset: proxy")
    # Endpoint health (docs/health.md): the circuit breaker, and limits that hold across the whole fleet.
    circuit: CircuitSettings = CircuitSettings()
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000, description="concurrent requests, fleet-wide")
    rate_limit: float | None = Field(default=None, gt=0, description="requests per second, fleet-wide")
    burst: int | None = Field(default=None, ge=1, description="requests above the rate at once (default: 1 s worth)")
    signing: Signing = None  # the schemes that sign (warren/topology/signing_keys.py); None: each it has a key for

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
        if self.tenant is not None and self.all_tenants:
            raise ValueError("all_tenants applies only to an endpoint without a tenant")
        if self.burst is not None and self.rate_limit is None:
            raise ValueError("burst applies only with a rate_limit")
        check_signing(self.signing, self.secret)
        return self

    def receives_tenant(self, tenant: str | None) -> bool:
        """Whether an event of ``tenant`` (None: a tenant-less event) is one this endpoint may receive: its own
        tenant's only; a platform endpoint tenant-less events, and every tenant's with ``all_tenants``.

        Routing already holds to this (docs/architecture.md, "Tenants"); the worker checks it again before every
        delivery, so that a message reaching the endpoint's queue by another way (a retry of an earlier endpoint
        of the same name coming due after the name was reused) never goes to another tenant's URL.
        """
        if self.tenant is not None:
            return tenant == self.tenant
        return self.all_tenants or tenant is None

    @property
    def partition_count(self) -> int:
        if self.ordering == "none":
            return 1
        return self.partitions if self.partitions is not None else 4

    def retry_policy(self, default: RetryPolicy) -> RetryPolicy:
        return self.retry.apply_to(default) if self.retry else default


class WarrenConfig(BaseSettings):
    """The whole configuration of a Warren deployment."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix="WARREN_",
        env_nested_delimiter="__",
        case_sensitive=False,
        allow_inf_nan=False,
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
    store: StoreSettings = StoreSettings()
    lanes: LaneSettings = LaneSettings()
    portal: PortalSettings = PortalSettings()
    catalog: CatalogSettings = CatalogSettings()
    event_types: tuple[EventTypeSpec, ...] = ()

    @field_validator("event_types")
    @classmethod
    def _one_entry_per_version(cls, value: tuple[EventTypeSpec, ...]) -> tuple[EventTypeSpec, ...]:
        seen: set[tuple[str, int]] = set()
        for spec in value:
            if (spec.name, spec.version) in seen:
                raise ValueError(f"event type {spec.name!r} version {spec.version} appears twice")
            seen.add((spec.name, spec.version))
        return value

    def event_catalog(self, stored: tuple[EventTypeSpec, ...] = ()) -> Catalog:
        """The catalog: the file's event types, then ``stored`` ones (the admin API's) of other names/versions."""
        return Catalog((*self.event_types, *stored), self.catalog.on_invalid)

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
    def _lanes_for_lane_endpoints(self) -> WarrenConfig:
        if self.lanes.count == 0:
            on_lanes = [e.name for e in self.endpoints if e.home == "lane"]
            if on_lanes:
                raise ValueError(
                    f"endpoint(s) {', '.join(on_lanes)} have home = 'lane' but lanes are off: set [lanes] count "
                    "(e.g. 16)"
                )
        return self

    @model_validator(mode="after")
    def _known_proxies(self) -> WarrenConfig:
        for endpoint in self.endpoints:
            if problem := proxy_problem(endpoint.proxy, self.delivery.proxies):
                raise ValueError(f"endpoint {endpoint.name!r}: {problem}")
        return self

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

    @property
    def attempt_log(self) -> bool:
        """Whether workers publish attempt records: ``worker.attempt_log``, or by default whether a store is set."""
        if self.worker.attempt_log is not None:
            return self.worker.attempt_log
        return self.store.url is not None

    @property
    def dedicated_endpoints(self) -> tuple[Endpoint, ...]:
        """The endpoints with queues of their own (``home = "dedicated"``)."""
        return tuple(e for e in self.endpoints if e.home == "dedicated")

    @property
    def lane_endpoints(self) -> tuple[Endpoint, ...]:
        """The endpoints that share the lanes (``home = "lane"``)."""
        return tuple(e for e in self.endpoints if e.home == "lane")

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
        if detail["type"] == "extra_forbidden" and loc and (keys := section_keys(WarrenConfig, loc)) is not None:
            message = "unknown key" + key_hint(str(loc[-1]), keys)
        problems.append(f"{where}: {message}" if where else message)
    return problems


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The file to read: ``--config``, else ``WARREN_CONFIG``, else ``./warren.toml``."""
    return Path(explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    signing_secrets: bool = True,
    api_tokens: bool = True,
    inbound_secrets: bool = True,
) -> WarrenConfig:
    """Read, merge with the environment and validate; every failure is a ConfigError naming file and field.

    Each secret is needed by one command, and each flag set to False loads without it: ``signing_secrets``
    (the endpoints', for ``warren worker``), ``api_tokens`` (``api.tokens`` and ``api.admin_tokens``, for
    ``warren api``), ``inbound_secrets`` (for ``warren receive``). An ``env:NAME`` of such a kind whose variable
    is missing (or malformed) is then kept unresolved (UnresolvedSecrets, UnresolvedText), and using it raises
    what resolving it raised. A literal's mistake is the file's and fails whoever loads it.
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
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise ConfigError(str(file), ["not valid TOML: nested too deeply"]) from None
    in_environment = f"{file} (with the WARREN_* environment)"
    if problems := override_problems(os.environ, WarrenConfig):
        raise ConfigError(in_environment, problems)
    overrides = {path: name for name, path in override_variables(os.environ, WarrenConfig).items()}
    wanted = {SIGNING_SECRETS: signing_secrets, API_TOKENS: api_tokens, INBOUND_SECRETS: inbound_secrets}
    try:
        with deferring(kind for kind, needed in wanted.items() if not needed):
            return WarrenConfig(**data)
    except ValidationError as exc:
        raise ConfigError(str(file), _problems(exc, data, overrides)) from None
    except SettingsError as exc:
        # A WARREN_* variable holding malformed JSON (e.g. WARREN_ENDPOINTS='[{'): the environment's fault.
        raise ConfigError(in_environment, [str(exc)]) from None
    except RecursionError:
        # pydantic-settings reads a WARREN_* variable's JSON with the standard library, which recurses (the file
        # cannot be the cause: tomllib read it whole above).
        raise ConfigError(in_environment, ["a WARREN_* variable holds JSON nested too deeply"]) from None
