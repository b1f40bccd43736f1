"""The routes: which notifications go to which channels, how; and the default route, for the rest."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from relay.config.base import ConfigModel
from relay.config.matchers import Matcher, MatcherError, parse_line
from relay.config.server import Seconds

MIN_DIGEST_WINDOW = 1.0  # seconds
MAX_DIGEST_ITEMS = 1000


def _digest_shorthand(value: Any) -> Any:
    """`digest: 15m` is `digest: {window: 15m}`."""
    return {"window": value} if isinstance(value, str | int | float) and not isinstance(value, bool) else value


class DigestConfig(ConfigModel):
    """Gather a route's deliveries to one channel (one address, on a per_recipient channel) for `window` from
    the first, then send them as one message; `max_items` sends at once (relay.digests.sending). `key`: a
    dotted path into the notification (`body.requestedResource.parentSystem.urn`): one digest per value."""

    window: Seconds
    max_items: int = Field(default=50, ge=1, le=MAX_DIGEST_ITEMS)
    key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$"
    )

    @field_validator("window")
    @classmethod
    def _window_long_enough(cls, value: float) -> float:
        if value < MIN_DIGEST_WINDOW:
            raise ValueError(f"a digest window must be at least 1s, not {value:g}s")
        return value


def _matcher_parses(line: str, info: ValidationInfo) -> str:
    """Each entry on its own, so that an error's key path is `routes[0].matchers[1]`; it names the route."""
    name = info.data.get("name")
    try:
        parse_line(line)
    except MatcherError as exc:
        raise ValueError(f"route {name!r}, {exc}" if name else str(exc)) from None
    return line


class RouteConfig(ConfigModel):
    # Shown with each delivery the route plans (records, API, admin page, preview); else `routes[i]`.
    name: str | None = Field(default=None, min_length=1, max_length=100)
    kinds: list[str] = Field(default_factory=lambda: ["*"])
    recipient_types: list[str] = Field(default_factory=lambda: ["*"])
    # Alertmanager matchers on the notification (relay.config.matchers); all must match.
    matchers: list[Annotated[str, AfterValidator(_matcher_parses)]] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    template: str = "auto"
    continue_: bool = Field(default=False, alias="continue")
    fallback: list[str] = Field(default_factory=list)
    # Names of `time_intervals`: outside every active one, or inside a mute one, a delivery is held.
    active_time_intervals: list[str] = Field(default_factory=list)
    mute_time_intervals: list[str] = Field(default_factory=list)
    digest: Annotated[DigestConfig | None, BeforeValidator(_digest_shorthand)] = None
    # A conversation's key, a template over the notification (relay.threads); empty: no thread.
    thread: str | None = Field(default=None, max_length=1000)
    thread_for: Seconds = Field(default=7 * 86400.0, ge=60)
    thread_broadcast: bool = False
    _compiled: list[Matcher] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _matchers_compile(self) -> RouteConfig:
        self._compiled = [m for line in self.matchers for m in parse_line(line)]
        return self

    @property
    def compiled_matchers(self) -> list[Matcher]:
        return self._compiled


class DefaultRoute(ConfigModel):
    channels: list[str] = Field(default_factory=list)
    template: str = "auto"
    fallback: list[str] = Field(default_factory=list)
