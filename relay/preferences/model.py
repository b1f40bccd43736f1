"""What each person chooses for themselves (docs/preferences.md): the kinds they opt out of on which channel, and the
hours they want to be reached in. Pure: the preferences, a delivery's kind and channel and the time in; why its people
skip it, or until when they hold it, out. A person is their `userRef` or their e-mail address, lower-cased; a delivery
obeys both (`claim_of_delivery`), and a link changes only the one it is bound to (relay.web.links)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from relay.config import Config
from relay.config.intervals import TimePeriodConfig
from relay.config.time_intervals import Interval, hold_until, parse_period
from relay.core.model import Delivery, Notification, kind_name
from relay.core.names import readable
from relay.core.recipients import email_of, valid_email
from relay.core.rendering import recipient_of
from relay.core.times import closed_too_long

ANY_CHANNEL = "*"
MAX_OPT_OUTS = 200
MAX_ACTIVE_HOURS = 20
MAX_PERSON_LENGTH = 320
# A held delivery asks the route and the person in turn until both let it go; intervals that never open
# together stop here, at the later of the two (the wake-up asks the route again then).
MAX_ROUNDS = 16
# Entity kinds of a `userRef` that name many people, not one: their deliveries are never a person's.
_NOT_A_PERSON = ("group:",)
_GLOB = frozenset("*?[")


class PreferenceError(ValueError):
    """A preference that cannot be stored: `field` is its dotted path (`optOuts.0.kind`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class OptOutModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1, max_length=200)
    channel: str = Field(default=ANY_CHANNEL, min_length=1, max_length=100)

    @field_validator("kind", "channel")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.isprintable() or value != value.strip():
            raise ValueError("only printable characters, no leading or trailing space")
        return value


class PreferenceModel(BaseModel):
    """What a PUT of one person's preferences takes (the API's request body)."""

    model_config = ConfigDict(extra="forbid")

    optOuts: list[OptOutModel] = Field(default_factory=list, max_length=MAX_OPT_OUTS)
    activeHours: list[TimePeriodConfig] | None = Field(default=None, max_length=MAX_ACTIVE_HOURS)


@dataclass(frozen=True)
class OptOut:
    kind: str  # a glob over kinds, with or without `notification:`
    channel: str = ANY_CHANNEL  # a channel name, or `*`

    def matches(self, kind: str, channel: str) -> bool:
        if self.channel != ANY_CHANNEL and self.channel != channel:
            return False
        return fnmatchcase(kind, self.kind) or fnmatchcase(kind_name(kind), self.kind)

    def describe(self) -> str:
        """How a skipped delivery's reason names it: `notification:x on requester-email`."""
        where = "every channel" if self.channel == ANY_CHANNEL else self.channel
        return f"{self.kind} on {where}"


@dataclass
class Preference:
    person: str
    optOuts: list[OptOut] = field(default_factory=list)
    # Alertmanager time-interval periods (`times`, `weekdays`, ..., `location`), as written; None: any time.
    activeHours: list[dict[str, Any]] | None = None
    updatedAt: float | None = None

    def public(self, iso: Callable[[float], str]) -> dict[str, Any]:
        return {**self.stored(), "updatedAt": iso(self.updatedAt) if self.updatedAt is not None else None}

    def stored(self) -> dict[str, Any]:
        """As kept in Redis and exported: `updatedAt` in epoch seconds."""
        return {
            "person": self.person,
            "optOuts": [{"kind": o.kind, "channel": o.channel} for o in self.optOuts],
            "activeHours": self.activeHours,
            "updatedAt": self.updatedAt,
        }

    def opted_out(self, kind: str, channel: str) -> OptOut | None:
        return next((o for o in self.optOuts if o.matches(kind, channel)), None)

    def with_opt_out(self, kind: str, channel: str) -> bool:
        """Add an opt-out of exactly this kind on this channel; False when one is there already."""
        wanted = OptOut(kind, channel)
        if wanted in self.optOuts:
            return False
        self.optOuts.append(wanted)
        return True

    def without_opt_out(self, kind: str, channel: str) -> bool:
        """Drop the opt-outs of exactly this kind (on this channel, or any with `*`); False: none was there."""
        kept = [o for o in self.optOuts if not (o.kind == kind and channel in (ANY_CHANNEL, o.channel))]
        changed = len(kept) != len(self.optOuts)
        self.optOuts = kept
        return changed

    def hours(self) -> Interval | None:
        """The active hours compiled (None: any time is theirs)."""
        if self.activeHours is None:
            return None
        return Interval("activeHours", tuple(parse_period(p) for p in self.activeHours))

    def past_retention(self, now: float, retention: float) -> str | None:
        """A warning when the active hours can stay closed longer than `retention` (what they hold is kept)."""
        hours = self.hours()
        return closed_too_long(hours, now, retention) if hours is not None else None


def validate(person: str, data: Any, channels: Mapping[str, Any] | None = None) -> Preference:
    """PreferenceError naming the field; `channels`: those an opt-out may name (or `*`), when checked."""
    person = check_person(person)
    try:
        model = PreferenceModel.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PreferenceError(where, str(first["msg"]).removeprefix("Value error, ")) from None
    for i, o in enumerate(model.optOuts):
        if channels is not None and o.channel != ANY_CHANNEL and o.channel not in channels:
            raise PreferenceError(f"optOuts.{i}.channel", f"no channel named {o.channel!r} (or `*` for every one)")
    hours = None
    if model.activeHours is not None:
        hours = [p.model_dump(exclude_defaults=True) for p in model.activeHours]
    opt_outs = list(dict.fromkeys(OptOut(o.kind, o.channel) for o in model.optOuts))
    return Preference(person, opt_outs, hours)


def is_address(person: str) -> bool:
    return ":" not in person and "@" in person


def canonical_person(person: str) -> str:
    """A person as relay keys them: an e-mail address lower-cased (as the gates find it), a userRef as it is."""
    return person.lower() if is_address(person) else person


def check_person(person: str) -> str:
    """The person named, as relay keys them; PreferenceError for what is no person (a group, say)."""
    if not person or len(person) > MAX_PERSON_LENGTH or not person.isprintable() or person != person.strip():
        raise PreferenceError("person", "a person is a userRef (user:default/alice) or an e-mail address")
    if person.lower().startswith(_NOT_A_PERSON):
        raise PreferenceError("person", "a group has no preferences: name a person's userRef or e-mail address")
    return canonical_person(person)


def from_stored(data: Mapping[str, Any]) -> Preference:
    """A preference as kept in Redis (or exported), read back; ValueError when it is not one."""
    person = data.get("person")
    if not isinstance(person, str):
        raise ValueError("a stored preference names its person")
    pref = validate(person, {"optOuts": data.get("optOuts") or [], "activeHours": data.get("activeHours")})
    updated = data.get("updatedAt")
    pref.updatedAt = float(updated) if isinstance(updated, int | float) else None
    return pref


def person_key(text: str) -> str | None:
    """`text` as relay keys a person (the rule of `check_person`); None for what cannot be one."""
    try:
        return check_person(text.strip())
    except PreferenceError:
        return None


@dataclass(frozen=True)
class Claim:
    """(`userRef` as a person key, lower-cased address), either None: the `userRef` is only a claim until something
    ties it to the address (relay.preferences.sending.links)."""

    ref: str | None = None
    address: str | None = None
    unusable_ref: bool = False  # a `userRef` that cannot key a person (too long, a control character)

    def people(self) -> list[str]:
        return list(dict.fromkeys(p for p in (self.ref, self.address) if p is not None))


def claim_of(recipient: Mapping[str, Any] | None) -> Claim:
    """A recipient's claim; nobody's for a group (a group is nobody's preference, its address included)."""
    if recipient is None:
        return Claim()
    ref = recipient.get("userRef")
    if isinstance(ref, str) and ref.strip().lower().startswith(_NOT_A_PERSON):
        return Claim()
    email = email_of(dict(recipient))
    address = email.lower() if email is not None and valid_email(email) else None
    if not isinstance(ref, str) or not ref.strip():
        return Claim(None, address)
    key = person_key(ref)
    return Claim(key, address, unusable_ref=key is None)


def personal(config: Config, delivery: Delivery) -> bool:
    """Whether a delivery may be addressed to one person: a per-recipient channel's, to one recipient."""
    channel = config.channels.get(delivery.channel)
    return channel is not None and channel.per_recipient and delivery.recipientIndex is not None


def claim_of_delivery(config: Config, notification: Notification, delivery: Delivery) -> Claim:
    """The claim of the recipient a delivery is addressed to (nobody's but a `personal` one's): its `people()` are
    every person whose preferences it obeys, its recipient's `userRef` and address."""
    if not personal(config, delivery) or delivery.messageIndex >= len(notification.messages):
        return Claim()
    return claim_of(recipient_of(notification, delivery))


def literal_opt_out(kind: str, channel: str) -> bool:
    """Whether a link can opt out of exactly this: no glob in the kind (it would opt out of others), a channel
    that is not `*`, and an opt-out read back under the same rule."""
    if _GLOB & set(kind) or channel == ANY_CHANNEL:
        return False
    try:
        OptOutModel(kind=kind, channel=channel)
    except ValidationError:
        return False
    return True


def critical(config: Config, kind: str) -> bool:
    return any(fnmatchcase(kind, p) or fnmatchcase(kind_name(kind), p) for p in config.preferences.critical_kinds)


def opted_out_why(config: Config, preferences: Sequence[Preference], kind: str, channel: str) -> str | None:
    """Why a delivery's people skip it: any one's opt-out of its kind on its channel (the `opted_out` gate and
    `relay preview` ask this); None when none matches, or the kind is critical."""
    if critical(config, kind):
        return None
    opted = next((o for p in preferences if (o := p.opted_out(kind, channel)) is not None), None)
    return f"opted out of {opted.describe()}" if opted is not None else None


def active_until(
    config: Config,
    preferences: Sequence[Preference],
    kind: str,
    now: float,
    route_until: Callable[[datetime], datetime | None],
) -> float | None:
    """Until when the active hours of a delivery's people hold it, as of `now`: the first instant at which every
    one's hours and the route let it go, found together; None when nothing holds it, or the kind is critical.
    `route_until`: when the delivery's route lets it go, asked at an instant (relay.core.quiet.held_until)."""
    hours = [h for p in preferences if (h := p.hours()) is not None]
    if not hours or critical(config, kind):
        return None
    start = at = datetime.fromtimestamp(now, tz=UTC)
    for _ in range(MAX_ROUNDS):
        moved = False
        for interval in hours:
            mine = hold_until(at, [interval], [])
            if mine is not None and mine > at:
                at, moved = mine, True
        theirs = route_until(at)
        if theirs is not None and theirs > at:
            at, moved = theirs, True
        if not moved:
            break
    return at.timestamp() if at > start else None


def human_kind(kind: str) -> str:
    """`notification:access-control-request-failed` as a person reads it: `Access control request failed`."""
    return readable(kind_name(kind)) or kind
