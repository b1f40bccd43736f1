"""The `server` section of the config: listen address, webhook path, credentials (tokens, Basic, HMAC,
Standard Webhooks) and the bounds on what one call may carry. Read through relay.config."""

from __future__ import annotations

import base64
import functools
import ipaddress
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from relay.config.base import ConfigModel
from relay.config.durations import parse_duration

# The longest eventId relay takes at all (the payload's model reads it from here); a config may lower it.
MAX_EVENT_ID_LENGTH = 512

Seconds = Annotated[float, BeforeValidator(parse_duration)]

# An HTTP header name as proxies pass it on unchanged (the platform's own are letters and hyphens).
_HEADER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]*$"
MIN_HMAC_SECRET = 16
MIN_WHSEC_BYTES = 24  # Standard Webhooks: secrets of 24 to 64 random bytes
# Past the ceiling of server.limits.max_deliveries, one planning job would outlast its RQ timeout.
MAX_DELIVERIES = 20_000
MAX_DELIVERIES_CEILING = 100_000
# Hard ceiling of server.limits.max_depth: below the depth (about 200) where pydantic's JSON parser gives up.
MAX_JSON_DEPTH = 128


class BasicAuth(ConfigModel):
    username: str
    password: str


class _Signed(ConfigModel):
    # Several secrets at once allow rotation; `secret: x` is the same as `secrets: [x]`.
    secrets: list[str] = Field(min_length=1)
    # A timestamp further than this from relay's clock is refused: a captured call cannot be replayed later.
    tolerance: Seconds = Field(default=300.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_secret(cls, data: Any) -> Any:
        if isinstance(data, dict) and "secret" in data:
            data = dict(data)
            single = data.pop("secret")
            data["secrets"] = [single, *data.get("secrets", [])]
        return data


class HmacAuth(_Signed):
    """A signature of `timestamp + "." + body` (HMAC-SHA256, hex), for senders that can sign."""

    header: str = Field(default="X-Relay-Signature", pattern=_HEADER_NAME)
    timestamp_header: str = Field(default="X-Relay-Timestamp", pattern=_HEADER_NAME)

    @field_validator("secrets")
    @classmethod
    def _long_enough(cls, secrets: list[str]) -> list[str]:
        # A short shared secret can be brute-forced offline from one captured signature.
        for i, secret in enumerate(secrets):
            if len(secret) < MIN_HMAC_SECRET:
                raise ValueError(f"secret {i} is shorter than {MIN_HMAC_SECRET} characters")
        return secrets


class StandardWebhooksAuth(_Signed):
    """Standard Webhooks (standardwebhooks.com, Svix's scheme), keyed by `whsec_` secrets."""

    @field_validator("secrets")
    @classmethod
    def _whsec(cls, secrets: list[str]) -> list[str]:
        for i, secret in enumerate(secrets):  # never the value in the message: it is a secret
            try:
                key = _whsec_key(secret)
            except ValueError:
                key = b""
            if not secret.startswith("whsec_") or len(key) < MIN_WHSEC_BYTES:
                raise ValueError(f"secret {i} is not whsec_ and the base64 of {MIN_WHSEC_BYTES} bytes or more")
        return secrets

    @property
    def keys(self) -> list[bytes]:
        return [_whsec_key(secret) for secret in self.secrets]


def _whsec_key(secret: str) -> bytes:
    encoded = secret.removeprefix("whsec_")  # base64, its padding optional (as the reference library reads it)
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)


class WebhookAuth(ConfigModel):
    tokens: list[str] = Field(default_factory=list)
    # The platform can only add custom headers: a token may come in a header of this name.
    header: str = Field(default="X-Relay-Token", pattern=_HEADER_NAME)
    basic: BasicAuth | None = None
    hmac: HmacAuth | None = None
    standard_webhooks: StandardWebhooksAuth | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.tokens) or any(s is not None for s in (self.basic, self.hmac, self.standard_webhooks))


class LimitsConfig(ConfigModel):
    """Bounds on what one webhook call may carry; a payload over one is answered 422 naming the field."""

    max_depth: int = Field(default=32, ge=4, le=MAX_JSON_DEPTH)
    max_messages: int = Field(default=100, ge=1)
    max_recipients: int = Field(default=1000, ge=1)
    max_kind_length: int = Field(default=256, ge=16)
    max_event_id_length: int = Field(default=MAX_EVENT_ID_LENGTH, ge=16, le=MAX_EVENT_ID_LENGTH)
    # Counted at intake (relay.core.fanout): refused, 422, rather than answered 202 and then too big to plan.
    # The default is the largest planning the suite runs end to end (20 messages x 1,000 recipients).
    max_deliveries: int = Field(default=MAX_DELIVERIES, ge=1, le=MAX_DELIVERIES_CEILING)
    # uvicorn's h11 refuses (plain-text 400) a header block growing past this; the webhook answers 431 to one
    # that came whole. The platform's custom header values may be 4096 characters long, hence the floor.
    max_header_bytes: int = Field(default=16_384, ge=8_192, le=1_048_576)


class AuthFailures(ConfigModel):
    """Refused credentials one client address may send to one surface within `window` before a 429 there."""

    limit: int = Field(default=10, ge=1)
    window: Seconds = Field(default=60.0, ge=1)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _proxy(value: str) -> str:
    try:
        ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address or a CIDR network (10.0.0.0/8)") from None
    return value.strip()


Proxy = Annotated[str, AfterValidator(_proxy)]


@functools.lru_cache(maxsize=16)
def _networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    # Asked at every call that takes a credential: parsed once per list.
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


# A token an operator may ship by mistake: too short to resist guessing, or the example's placeholder.
MIN_TOKEN_LENGTH = 24
PLACEHOLDER = "change-me"


def is_loopback(host: str) -> bool:
    return host in {"127.0.0.1", "localhost", "::1"} or host.startswith("127.")


def _weakness(value: str) -> str | None:
    if PLACEHOLDER in value.lower():
        return f"contains {PLACEHOLDER!r}"
    if len(value) < MIN_TOKEN_LENGTH:
        return f"is shorter than {MIN_TOKEN_LENGTH} characters"
    return None


class ServerConfig(ConfigModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    path: str = "/webhook"
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    auth: WebhookAuth = Field(default_factory=WebhookAuth)
    admin_tokens: list[str] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    # Binding a non-loopback address with no webhook auth must be asked for explicitly.
    allow_unauthenticated: bool = False
    auth_failures: AuthFailures = Field(default_factory=AuthFailures)
    # Only these peers' X-Forwarded-For names the client: a client cannot name itself someone else.
    trusted_proxies: list[Proxy] = Field(default_factory=list)

    def trusted_networks(self) -> tuple[Network, ...]:
        return _networks(tuple(self.trusted_proxies))

    @model_validator(mode="after")
    def _path_is_absolute(self) -> ServerConfig:
        if not self.path.startswith("/"):
            raise ValueError(f"server.path must start with '/': {self.path!r}")
        if self.path.startswith("/api/") or self.path in {"/healthz", "/readyz", "/metrics", "/openapi.json"}:
            raise ValueError(f"server.path {self.path!r} collides with a built-in endpoint")
        return self

    def weak_credentials(self) -> list[str]:
        """Each guessable credential as `key path: why` (never its value)."""
        found = [(f"server.auth.tokens[{i}]", t) for i, t in enumerate(self.auth.tokens)]
        found += [(f"server.admin_tokens[{i}]", t) for i, t in enumerate(self.admin_tokens)]
        if self.auth.basic is not None:
            found.append(("server.auth.basic.password", self.auth.basic.password))
        return [f"{key} {why}" for key, value in found if (why := _weakness(value)) is not None]

    def exposure_problem(self) -> str | None:
        """Beyond loopback, anyone who reaches the port may try: the webhook must take credentials, none guessable."""
        host = self.host
        if is_loopback(host):
            return None
        if not self.auth.enabled and not self.allow_unauthenticated:
            return (
                f"server.host is {host!r} but no webhook auth is configured: anyone could post notifications. "
                "Configure server.auth.tokens or server.auth.basic, or set server.allow_unauthenticated: true."
            )
        weak = self.weak_credentials()
        if weak:
            return (
                f"server.host is {host!r}, reachable by others, and a credential could be guessed: {'; '.join(weak)}. "
                "Put a strong one there: `relay token` prints one (with the example config: "
                "RELAY_WEBHOOK_TOKEN=$(relay token) RELAY_ADMIN_TOKEN=$(relay token)); or listen on 127.0.0.1 only."
            )
        return None

    def secrets(self) -> list[str]:
        auth = self.auth
        found = [*auth.tokens, *self.admin_tokens]
        if auth.basic is not None:
            found.append(auth.basic.password)
        if auth.hmac is not None:
            found.extend(auth.hmac.secrets)
        if auth.standard_webhooks is not None:  # the base64 alone too, as a sender's tooling may show it
            found.extend(s for secret in auth.standard_webhooks.secrets for s in (secret, secret[6:]))
        return [s for s in found if s]
