"""The `server` section of the config: listen address, webhook path, credentials (tokens, Basic, HMAC)
and the bounds on what one call may carry. Read through relay.config."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from relay.config.durations import parse_duration

# The longest eventId relay takes at all (the payload's model reads it from here); a config may lower it.
MAX_EVENT_ID_LENGTH = 512

Seconds = Annotated[float, BeforeValidator(parse_duration)]

# An HTTP header name as proxies pass it on unchanged (the platform's own are letters and hyphens).
_HEADER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]*$"
MIN_HMAC_SECRET = 16
# Hard ceiling of server.limits.max_depth: below the depth (about 200) where pydantic's JSON parser gives up.
MAX_JSON_DEPTH = 128


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
