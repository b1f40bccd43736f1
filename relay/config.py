"""Settings: YAML file, `${ENV}` substitution, `RELAY_SECTION__KEY` overrides; read once, validated."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from relay.core.durations import parse_duration
from relay.core.matchers import Matcher, MatcherError, parse_line
from relay.core.model import MAX_EVENT_ID_LENGTH

Seconds = Annotated[float, BeforeValidator(parse_duration)]

ENV_PREFIX = "RELAY_"
# Environment names that are not config keys.
_NOT_KEYS = {"RELAY_CONFIG"}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# An HTTP header name as proxies pass it on unchanged (the platform's own are letters and hyphens).
_HEADER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]*$"
MIN_HMAC_SECRET = 16
# Hard ceiling of server.limits.max_depth: below the depth (about 200) where pydantic's JSON parser gives up.
MAX_JSON_DEPTH = 128


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and the reason."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BasicAuth(_Model):
    username: str
    password: str


class HmacAuth(_Model):
    """A signature of `timestamp + "." + body` (HMAC-SHA256, hex), for senders that can sign."""

    # Several secrets at once allow rotation; `secret: x` is the same as `secrets: [x]`.
    secrets: list[str] = Field(min_length=1)
    header: str = Field(default="X-Relay-Signature", pattern=_HEADER_NAME)
    timestamp_header: str = Field(default="X-Relay-Timestamp", pattern=_HEADER_NAME)
    # A timestamp further than this from relay's clock, either way, is refused: a captured call
    # cannot be replayed later.
    tolerance: Seconds = Field(default=300.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_secret(cls, data: Any) -> Any:
        if isinstance(data, dict) and "secret" in data:
            data = dict(data)
            single = data.pop("secret")
            data["secrets"] = [single, *data.get("secrets", [])]
        return data

    @field_validator("secrets")
    @classmethod
    def _long_enough(cls, secrets: list[str]) -> list[str]:
        # A short shared secret can be brute-forced offline from one captured signature.
        for i, secret in enumerate(secrets):
            if len(secret) < MIN_HMAC_SECRET:
                raise ValueError(f"secret {i} is shorter than {MIN_HMAC_SECRET} characters")
        return secrets


class WebhookAuth(_Model):
    tokens: list[str] = Field(default_factory=list)
    # The platform can only add custom headers: a token may come in a header of this name.
    header: str = Field(default="X-Relay-Token", pattern=_HEADER_NAME)
    basic: BasicAuth | None = None
    hmac: HmacAuth | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.tokens) or self.basic is not None or self.hmac is not None


class LimitsConfig(_Model):
    """Bounds on what one webhook call may carry; a payload over one is answered 422 naming the field."""

    max_depth: int = Field(default=32, ge=4, le=MAX_JSON_DEPTH)
    max_messages: int = Field(default=100, ge=1)
    max_recipients: int = Field(default=1000, ge=1)
    max_kind_length: int = Field(default=256, ge=16)
    max_event_id_length: int = Field(default=MAX_EVENT_ID_LENGTH, ge=16, le=MAX_EVENT_ID_LENGTH)
    # All request headers. uvicorn's h11 parser refuses (plain-text 400) a header block that grows past
    # this while it arrives; the webhook answers 431 to one that came whole. The platform's custom
    # header values may be 4096 characters long, hence the floor.
    max_header_bytes: int = Field(default=16_384, ge=8_192, le=1_048_576)


class ServerConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    path: str = "/webhook"
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    auth: WebhookAuth = Field(default_factory=WebhookAuth)
    admin_tokens: list[str] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    # Binding a non-loopback address with no webhook auth must be asked for explicitly.
    allow_unauthenticated: bool = False

    @model_validator(mode="after")
    def _path_is_absolute(self) -> ServerConfig:
        if not self.path.startswith("/"):
            raise ValueError(f"server.path must start with '/': {self.path!r}")
        if self.path.startswith("/api/") or self.path in {"/healthz", "/readyz", "/metrics", "/openapi.json"}:
            raise ValueError(f"server.path {self.path!r} collides with a built-in endpoint")
        return self

    def secrets(self) -> list[str]:
        """Every credential of the server section: webhook tokens, Basic password, HMAC secrets, admin tokens."""
        auth = self.auth
        found = [*auth.tokens, *self.admin_tokens]
        if auth.basic is not None:
            found.append(auth.basic.password)
        if auth.hmac is not None:
            found.extend(auth.hmac.secrets)
        return [s for s in found if s]


class RedisConfig(_Model):
    url: str | None = None
    # Only for the embedded server: fsync policy of its append-only file.
    appendfsync: Literal["always", "everysec"] = "everysec"


class RetryConfig(_Model):
    attempts: int = Field(default=6, ge=1, le=100)
    backoff: list[Seconds] = Field(default_factory=lambda: [10.0, 60.0, 300.0, 1800.0, 7200.0])

    def delay_after(self, attempt: int) -> float:
        """Wait before try number attempt+1 (attempt counts from 1); the last step repeats."""
        if not self.backoff:
            return 0.0
        return self.backoff[min(attempt - 1, len(self.backoff) - 1)]


class PlatformConfig(_Model):
    url: str | None = None
    access_token: str | None = None
    auth: Literal["bearer", "basic"] = "bearer"
    jwt_duration: Seconds = 300.0  # the platform's default; ask for no longer than needed
    cache_ttl: Seconds = 3600.0
    timeout: Seconds = 5.0


class TemplatesConfig(_Model):
    dir: str = "./templates"
    # Use the templates shipped with relay (per kind and recipient type) where the operator has none.
    # Off by default: then a kind without a template of the operator's gets the platform's own text.
    builtin: bool = False


def parse_rate(value: str | float | int | None) -> float | None:
    """Sends per second from "1/s", "20/m", "100/h" (or a bare number per second)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError("rate must be positive")
        return float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|m|h|sec|min|hour|second|minute)\s*", str(value))
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"rate {value!r} is not like 1/s, 20/m or 100/h")
    per = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
    return float(match.group(1)) / per[match.group(2)]


class ChannelConfig(_Model):
    url: str
    per_recipient: bool = False
    # Force a body format; by default it follows the channel's scheme (md chat, html mail, txt others).
    format: Literal["md", "html", "txt"] | None = None
    # Most sends per second to this channel ("1/s", "20/m"); the excess waits in the queue.
    rate: Annotated[float | None, BeforeValidator(parse_rate)] = None


class RouteConfig(_Model):
    # Shown with each delivery the route plans (records, API, admin page, preview); else `routes[i]`.
    name: str | None = Field(default=None, min_length=1, max_length=100)
    kinds: list[str] = Field(default_factory=lambda: ["*"])
    recipient_types: list[str] = Field(default_factory=lambda: ["*"])
    # Alertmanager matchers on the notification (relay.core.matchers); all must match.
    matchers: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    template: str = "auto"
    continue_: bool = Field(default=False, alias="continue")
    fallback: list[str] = Field(default_factory=list)
    _compiled: list[Matcher] = PrivateAttr(default_factory=list)

    @field_validator("matchers")
    @classmethod
    def _matchers_parse(cls, lines: list[str], info: ValidationInfo) -> list[str]:
        name = info.data.get("name")
        for i, line in enumerate(lines):
            try:
                parse_line(line)
            except MatcherError as exc:
                raise ValueError(f"{f'route {name!r}, ' if name else ''}matchers[{i}]: {exc}") from None
        return lines

    @model_validator(mode="after")
    def _matchers_compile(self) -> RouteConfig:
        self._compiled = [m for line in self.matchers for m in parse_line(line)]
        return self

    @property
    def compiled_matchers(self) -> list[Matcher]:
        return self._compiled


class DefaultRoute(_Model):
    channels: list[str] = Field(default_factory=list)
    template: str = "auto"
    fallback: list[str] = Field(default_factory=list)


class LoggingConfig(_Model):
    level: str = "INFO"
    format: Literal["auto", "json", "text"] = "auto"


class Config(_Model):
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
    workers: int = Field(default=2, ge=0, le=64)
    # Deliveries each worker process sends at once (RQ SimpleWorker loops in threads): sends mostly
    # wait on the network, so a slow chat API does not hold up everything behind it.
    worker_threads: int = Field(default=16, ge=1, le=256)
    # Longest one send may take; a worker killed mid-send is noticed about this + 80 s later.
    send_timeout: Seconds = 20.0
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    # Where the file was read from; relative paths in the file are relative to it.
    base_dir: str = Field(".", exclude=True)

    @model_validator(mode="after")
    def _route_names_unique(self) -> Config:
        # Each delivery names its route: two routes of one name could not be told apart.
        names = [r.name for r in self.routes if r.name]
        for i, route in enumerate(self.routes):
            if route.name == "default":
                raise ValueError(f"routes.{i}.name: the route name 'default' is the default route's")
            if route.name and names.count(route.name) > 1:
                raise ValueError(f"routes.{i}.name: another route is also named {route.name!r}")
        return self

    @model_validator(mode="after")
    def _routes_name_known_channels(self) -> Config:
        for i, route in enumerate(self.routes):
            for field in ("channels", "fallback"):
                for name in getattr(route, field):
                    if name not in self.channels:
                        raise ValueError(f"routes.{i}.{field}: unknown channel {name!r}")
        for field in ("channels", "fallback"):
            for name in getattr(self.default, field):
                if name not in self.channels:
                    raise ValueError(f"default.{field}: unknown channel {name!r}")
        return self

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
        return [s for s in found if s and len(s) >= 4]


def _substitute(value: Any, where: str, environ: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, f"{where}.{k}" if where else str(k), environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, f"{where}.{i}", environ) for i, v in enumerate(value)]
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{where}: environment variable {name} is not set")

        return _ENV_REF.sub(repl, value)
    return value


def _schema_path(model: type[BaseModel], rest: str) -> list[str] | None:
    """The key path whose names, joined by '_', spell `rest` (server_max_body_bytes -> server.max_body_bytes)."""
    found: list[list[str]] = []
    for field_name, info in model.model_fields.items():
        key = info.alias or field_name
        if rest == key:
            found.append([key])
        elif (
            rest.startswith(key + "_") and isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
        ):
            tail = _schema_path(info.annotation, rest[len(key) + 1 :])
            if tail:
                found.append([key, *tail])
    return found[0] if len(found) == 1 else None


def _env_path(name: str) -> list[str] | None:
    rest = name[len(ENV_PREFIX) :]
    if "__" in rest:
        parts = [p.lower() for p in rest.split("__") if p]
    else:
        parts = _schema_path(Config, rest.lower()) or []
    # Only names of config sections count: RELAY_WEBHOOK_TOKEN may be a secret for ${...}.
    if not parts or parts[0] not in Config.model_fields or parts[0] == "base_dir":
        return None
    return parts


def _apply_env(data: dict[str, Any], environ: dict[str, str]) -> None:
    """RELAY_SERVER__PORT=9000 (or RELAY_SERVER_PORT, matched against the known keys) sets server.port;
    values are read as YAML (lists, numbers, booleans)."""
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in _NOT_KEYS:
            continue
        parts = _env_path(name)
        if parts is None:
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            value = raw
        node = data
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)


def default_config_path() -> Path | None:
    """Without --config: ./config.yaml when it exists, else $RELAY_CONFIG (SPEC's order)."""
    here = Path("config.yaml")
    if here.exists():
        return here
    env = os.environ.get("RELAY_CONFIG")
    return Path(env) if env else None


def load_config(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read, substitute, override and validate; raise ConfigError naming the key and the reason."""
    environ = dict(os.environ if environ is None else environ)
    file = Path(path) if path is not None else default_config_path()
    data: dict[str, Any] = {}
    base = Path(".")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML: {exc}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: the top level must be a mapping of keys")
        data = _substitute(loaded, "", environ)
        base = file.resolve().parent
    _apply_env(data, environ)
    data["base_dir"] = str(base)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid config: {_format_error(exc)}") from None
