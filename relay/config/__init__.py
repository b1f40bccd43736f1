"""Settings: the models that validate them, and load_config (YAML file, `${ENV}` substitution,
`RELAY_SECTION__KEY` overrides: see relay.config.source and relay.config.environment), read once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from relay.config.base import ConfigModel
from relay.config.durations import parse_rate as parse_rate
from relay.config.environment import environment_settings, hidden, merge, named_by_variable
from relay.config.intervals import TimeIntervalConfig
from relay.config.messages import validation_problems
from relay.config.routes import DefaultRoute as DefaultRoute
from relay.config.routes import DigestConfig as DigestConfig
from relay.config.routes import RouteConfig as RouteConfig
from relay.config.server import HmacAuth as HmacAuth
from relay.config.server import LimitsConfig as LimitsConfig
from relay.config.server import Seconds as Seconds
from relay.config.server import ServerConfig as ServerConfig
from relay.config.server import StandardWebhooksAuth as StandardWebhooksAuth
from relay.config.server import WebhookAuth as WebhookAuth
from relay.config.source import ConfigError as ConfigError
from relay.config.source import default_config_path as default_config_path
from relay.config.source import reference_problems, substitute
from relay.config.time_intervals import Interval
from relay.config.urls import HttpUrl, RedisUrl
from relay.config.yaml_file import read_file

# Set by read_config, which has reported unknown channels itself (all of them, with other errors).
_REFERENCES_CHECKED = "references_checked"


class RedisConfig(ConfigModel):
    url: RedisUrl = None
    # The embedded server's fsync policy: `always`, as a 202 means durable (docs/operations.md: everysec can lose).
    appendfsync: Literal["always", "everysec"] = "always"
    # With replicas (Sentinel): a 202 once this many acknowledged the write (Redis WAIT): a failover loses none.
    min_replicas: int = Field(default=0, ge=0, le=16)
    # How long the accept waits for those replicas before it answers 503 with Retry-After.
    replica_timeout: Seconds = Field(default=1.0, gt=0, le=30)


class MetricsConfig(ConfigModel):
    # `relay worker` serves its own /metrics on this port (prometheus-client's HTTP exposition); none by default.
    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"  # 0.0.0.0 in a container, for Prometheus to reach it
    # Kinds given their own metric series, fleet-wide; later ones count as kind="other" (series stay bounded).
    max_kinds: int = Field(default=200, ge=1, le=100_000)


class RetryConfig(ConfigModel):
    attempts: int = Field(default=6, ge=1, le=100)
    backoff: list[Seconds] = Field(default_factory=lambda: [10.0, 60.0, 300.0, 1800.0, 7200.0])


class PlatformConfig(ConfigModel):
    url: HttpUrl = None
    ui_url: HttpUrl = None  # the platform UI's base, for links to a notification's resource; default `url`
    access_token: str | None = None
    auth: Literal["bearer", "basic"] = "bearer"
    jwt_duration: Seconds = 300.0  # the platform's default; ask for no longer than needed
    cache_ttl: Seconds = 3600.0
    timeout: Seconds = 5.0


class TemplatesConfig(ConfigModel):
    dir: str = "./templates"
    # Use relay's shipped templates where the operator has none; off: the platform's own text.
    builtin: bool = False


def _outage_off(value: Any) -> Any:
    """`outage: off` (YAML reads a bare `off` as false) turns the outage rule off for the channel."""
    return None if value is False or (isinstance(value, str) and value.strip().lower() == "off") else value


class OutageConfig(ConfigModel):
    """When a channel is down (relay.outages.model): after `after` transient failures in a row (and as many as its
    recent successes) its deliveries wait as held, and one is tried every `probe` (doubling up to 10 min)."""

    after: int = Field(default=5, ge=1, le=1000)
    probe: Seconds = Field(default=30.0, ge=1, le=600)


class ChannelConfig(ConfigModel):
    url: str
    label: str | None = Field(default=None, min_length=1, max_length=60)  # shown to recipients (relay.core.names)
    outage: Annotated[OutageConfig | None, BeforeValidator(_outage_off)] = Field(default_factory=OutageConfig)
    per_recipient: bool = False
    # Force a body format; by default it follows the channel's scheme (md chat, html mail, txt others).
    format: Literal["md", "html", "txt"] | None = None
    # Most sends per second to this channel ("1/s", "20/m"); the excess waits in the queue.
    rate: Annotated[float | None, BeforeValidator(parse_rate)] = None


MIN_PREFERENCES_SECRET = 32  # bytes: the links it signs live for months


class PreferencesConfig(ConfigModel):
    """What people choose for themselves (relay.preferences.model): where links in messages point, the secret
    that signs them, how long a link is good for, and the kinds no preference may skip or hold."""

    public_url: HttpUrl = None  # absent: no links in messages, preferences through the API and CLI only
    secret: str | None = None
    link_ttl: Seconds = Field(default=90 * 86400.0, gt=0)
    critical_kinds: list[str] = Field(default_factory=list)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) < MIN_PREFERENCES_SECRET:
            raise ValueError(f"the secret is shorter than {MIN_PREFERENCES_SECRET} bytes")
        return value

    @model_validator(mode="after")
    def _links_are_signed(self) -> PreferencesConfig:
        if self.public_url and not self.secret:
            raise ValueError("public_url needs a secret to sign the links (preferences.secret, 32 bytes or more)")
        return self

    @property
    def links(self) -> bool:
        """Whether messages carry links (a public URL and a secret to sign them)."""
        return bool(self.public_url and self.secret)


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LoggingConfig(ConfigModel):
    level: Annotated[LogLevel, BeforeValidator(lambda v: v.upper() if isinstance(v, str) else v)] = "INFO"
    format: Literal["auto", "json", "text"] = "auto"


class TracingConfig(ConfigModel):
    """OpenTelemetry traces (README, "Tracing"): on here, or by OpenTelemetry's own OTEL_EXPORTER_OTLP_ENDPOINT
    (or _TRACES_ENDPOINT); everything else (exporter, sampler, batching, service name) by OpenTelemetry's own
    variables. `ui_url`: a trace in the operator's tracing UI, `{trace_id}` standing for the id."""

    enabled: bool = False
    ui_url: str | None = None

    @field_validator("ui_url")
    @classmethod
    def _ui_url_names_the_trace(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith(("http://", "https://")) or "{trace_id}" not in value):
            raise ValueError(
                "an http(s) URL with {trace_id} where the trace id goes, e.g. http://jaeger:16686/trace/{trace_id}"
            )
        return value

    def link(self, trace_id: str | None) -> str | None:
        """The trace's page in the tracing UI, when one is configured."""
        return self.ui_url.replace("{trace_id}", trace_id) if self.ui_url and trace_id else None


# Longer than a live worker's stall (a dozen seconds is no death); what a dead one held goes within 90 s.
DEAD_WORKER_AFTER = 45.0


class Config(ConfigModel):
    server: ServerConfig = Field(default_factory=lambda: ServerConfig())
    redis: RedisConfig = Field(default_factory=RedisConfig)
    data_dir: str = "./.relay"
    dedup_ttl: Seconds = 7 * 86400.0
    # How long events and deliveries (failed ones included) stay inspectable and replayable.
    retention: Seconds = 30 * 86400.0
    retry: RetryConfig = Field(default_factory=lambda: RetryConfig())
    platform: PlatformConfig = Field(default_factory=PlatformConfig)
    templates: TemplatesConfig = Field(default_factory=TemplatesConfig)
    channels: dict[str, ChannelConfig] = Field(default_factory=dict)
    routes: list[RouteConfig] = Field(default_factory=list)
    default: DefaultRoute = Field(default_factory=DefaultRoute)
    # Alertmanager's time intervals, named by routes' active_time_intervals / mute_time_intervals.
    time_intervals: list[TimeIntervalConfig] = Field(default_factory=list)
    workers: int = Field(default=2, ge=0, le=64)
    # Sender threads of each worker (sends mostly wait on the network: a slow chat API holds up no other).
    worker_threads: int = Field(default=16, ge=1, le=256)
    # Longest one send may take; a delivery's send lock lives this + 30 s.
    send_timeout: Seconds = 20.0
    # A worker not heard from for this long is taken for dead and the others take over what it held.
    dead_worker_after: Seconds = Field(default=DEAD_WORKER_AFTER, ge=1.0)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    preferences: PreferencesConfig = Field(default_factory=PreferencesConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    # Where the file was read from; relative paths in the file are relative to it.
    base_dir: str = Field(".", exclude=True)
    _intervals: dict[str, Interval] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _route_names_unique(self) -> Config:
        # Each delivery names its route: two routes of one name could not be told apart.
        names = [r.name for r in self.routes if r.name]
        for i, route in enumerate(self.routes):
            if route.name == "default":
                raise ValueError(f"routes[{i}].name: the route name 'default' is the default route's")
            if route.name and names.count(route.name) > 1:
                raise ValueError(f"routes[{i}].name: another route is also named {route.name!r}")
        return self

    @model_validator(mode="after")
    def _intervals_compile(self) -> Config:
        for i, interval in enumerate(self.time_intervals):
            if interval.name in self._intervals:
                raise ValueError(f"time_intervals[{i}].name: another interval is also named {interval.name!r}")
            self._intervals[interval.name] = interval.compiled()
        return self

    @model_validator(mode="after")
    def _routes_name_known_channels(self, info: ValidationInfo) -> Config:
        if info.context and info.context.get(_REFERENCES_CHECKED):
            return self
        data = self.model_dump(include={"channels", "routes", "default", "time_intervals"})
        problems = reference_problems(data)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def intervals(self, names: list[str]) -> list[Interval]:
        """The compiled time intervals of these names (validation made sure each exists)."""
        return [self._intervals[n] for n in names if n in self._intervals]

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def data_path(self) -> Path:
        return self.path(self.data_dir)

    @property
    def templates_path(self) -> Path:
        return self.path(self.templates.dir)

    def secrets(self) -> list[str]:
        """Every configured secret value, so that logs and answers can be scrubbed of them."""
        found: list[str] = self.server.secrets()
        if self.platform.access_token:
            found.append(self.platform.access_token)
        found.extend(ch.url for ch in self.channels.values())
        if self.preferences.secret:
            found.append(self.preferences.secret)
        return [s for s in found if s and len(s) >= 4]


@dataclass
class ConfigRead:
    """What reading the config gave: the file (None: none), the config when there was no problem, the problems."""

    file: Path | None
    config: Config | None
    problems: list[str] = field(default_factory=list)
    # As read, substituted and overridden: `relay check` still checks channel URLs when validation failed.
    data: dict[str, Any] = field(default_factory=dict)


def read_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> ConfigRead:
    """Read, substitute, override and validate, collecting every problem; ConfigError for an unreadable file."""
    environ = dict(os.environ if environ is None else environ)
    file = Path(path) if path is not None else default_config_path()
    data: dict[str, Any] = {}
    base = Path(".")
    problems: list[str] = []
    if file is not None:
        data = substitute(read_file(file, problems), environ, problems)
        base = file.resolve().parent
    read: dict[str, str] = {}  # what each _FILE variable's file holds: never shown
    merge(data, environment_settings(Config, environ, problems, read))
    data["base_dir"] = str(base)
    config = None
    try:
        config = Config.model_validate(data, context={_REFERENCES_CHECKED: True})
    except ValidationError as exc:
        problems.extend(validation_problems(exc, Config))
    problems.extend(reference_problems(data))
    problems = [hidden(named_by_variable(p, Config, environ), read) for p in problems]
    return ConfigRead(file, None if problems else config, problems, data)


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """The validated config; ConfigError naming every key that is wrong and why."""
    found = read_config(path, environ)
    if found.config is None:
        raise ConfigError("invalid config: " + "; ".join(found.problems), found.problems)
    return found.config
