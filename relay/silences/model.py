"""Silences (docs/silences.md): Alertmanager's, except that nothing is lost. Pure: the silences, a delivery (and,
when a matcher reads it, its notification) and the time in; whether a silence holds or skips it out (`silenced`, the
one question the gates ask)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from relay.config.matchers import Matcher, MatcherError, Op, parse_line, read
from relay.core.model import Delivery, iso
from relay.core.times import kept_past, showable

Action = Literal["hold", "skip"]
HOLD: Action = "hold"
SKIP: Action = "skip"
# Names a silence's matcher may read besides the notification's: the delivery's own.
DELIVERY_NAMES = ("recipientType", "channel")
# The notification's parts: a silence that reads any of them needs the notification at a due delivery.
_NOTIFICATION_ROOTS = ("body", "metadata", "sender")
PREFIX = "silenced by "
MAX_MATCHERS = 50
MAX_PROGRAM = 5000  # RE2's program size of a silence's regex (`\pL` alone is 1,200)
MAX_SILENCES = 1000  # active and pending at once: a 422 past it (docs/silences.md)
# The regex work one delivery's silences may cost (text length x RE2 program size, each regex matcher): the
# most a hostile silence can cost is some 0.3 s here. A silence that would cost more holds what it may match.
MATCH_BUDGET = 40_000_000
# The delivery's names an equality matcher may index a silence by: a delivery is matched only against the
# silences that name its own value (and those that name neither).
_INDEXED = ("kind", "channel")
MAX_TEXT = 1000  # a comment's or a creator's length


def compile_matchers(lines: Iterable[str]) -> list[Matcher]:
    """A line may hold several; MatcherError naming the wrong one, or that there are over MAX_MATCHERS, or a
    regex whose RE2 program is over MAX_PROGRAM."""
    found = [m for line in lines for m in parse_line(line, DELIVERY_NAMES)]
    if len(found) > MAX_MATCHERS:
        raise MatcherError(f"{len(found)} matchers: a silence has at most {MAX_MATCHERS}")
    for m in found:
        if m.regex is not None and m.regex.programsize > MAX_PROGRAM:
            raise MatcherError(f"{m.text}: its regex compiles to {m.regex.programsize} steps, at most {MAX_PROGRAM}")
    return found


@dataclass(frozen=True)
class Silence:
    id: str
    matchers: tuple[str, ...]
    startsAt: float
    endsAt: float
    createdBy: str
    comment: str
    action: Action = HOLD
    compiled: tuple[Matcher, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.compiled:
            object.__setattr__(self, "compiled", tuple(compile_matchers(self.matchers)))

    def state(self, now: float) -> str:
        if now < self.startsAt:
            return "pending"
        return "active" if now < self.endsAt else "expired"

    def active(self, now: float) -> bool:
        return self.startsAt <= now < self.endsAt

    def public(self, now: float) -> dict[str, Any]:
        """As the API shows it (SPEC's shape, with its `state` at `now`)."""
        return {
            "id": self.id,
            "matchers": list(self.matchers),
            "startsAt": iso(self.startsAt),
            "endsAt": iso(self.endsAt),
            "createdBy": self.createdBy,
            "comment": self.comment,
            "action": self.action,
            "state": self.state(now),
        }

    def to_json(self) -> str:
        fields = ("id", "matchers", "startsAt", "endsAt", "createdBy", "comment", "action")
        return json.dumps({k: getattr(self, k) if k != "matchers" else list(self.matchers) for k in fields})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Silence:
        """ValueError (KeyError, TypeError) for one no reader could use."""
        data = json.loads(raw)
        matchers, action = data["matchers"], data.get("action", HOLD)
        if not (isinstance(matchers, list) and all(isinstance(m, str) for m in matchers) and action in (HOLD, SKIP)):
            raise ValueError("its matchers are not a list of texts, or its action is neither hold nor skip")
        found = cls(
            id=str(data["id"]),
            matchers=tuple(matchers),
            startsAt=float(data["startsAt"]),
            endsAt=float(data["endsAt"]),
            createdBy=str(data.get("createdBy", "")),
            comment=str(data.get("comment", "")),
            action=action,
        )
        if not (showable(found.startsAt) and showable(found.endsAt) and found.startsAt <= found.endsAt):
            raise ValueError(f"its times ({found.startsAt}, {found.endsAt}) are not a span within 1970..9999")
        if not found.compiled:
            raise ValueError("it has no matcher: it would silence everything unseen")
        return found

    def ended(self, at: float) -> Silence:
        """The silence expired at `at` (a pending one ends before it began: it never silenced anything)."""
        return replace(self, startsAt=min(self.startsAt, at), endsAt=at)


def past_retention(silence: Silence, now: float, retention: float) -> str | None:
    """What its maker is told of a silence that holds longer than `retention` (what it holds from now, or
    from its start, waits until its end): the API's `warnings`, the CLI's line, the page's note; else None."""
    if silence.action != HOLD or silence.endsAt - max(now, silence.startsAt) <= retention:
        return None
    return f"it holds what matches until {iso(silence.endsAt)}, longer than retention: {kept_past(retention)}"


def holder(last_error: str | None) -> str | None:
    """The silence a held delivery waits for, read from its `lastError`; None: no silence holds it."""
    if not last_error or not last_error.startswith(PREFIX):
        return None
    return last_error[len(PREFIX) :].split(" ", 1)[0].removesuffix(":")


def reads_notification(silences: Iterable[Silence]) -> bool:
    """Whether a matcher reads the notification (else the delivery's record is enough)."""
    return any(m.path[0] in _NOTIFICATION_ROOTS for s in silences for m in s.compiled)


def delivery_view(notification: Mapping[str, Any] | None, record: Delivery) -> dict[str, Any]:
    """The notification as routes read it (None when not needed), with the delivery's own names."""
    return {
        **(notification or {}),
        "kind": record.kind,
        "recipientType": record.recipientType or "",
        "channel": record.channel,
    }


@dataclass(frozen=True)
class Silenced:
    """A silence's answer for one delivery: `silence` decides (a skip, else the hold that ends last); `costly`:
    matching it would cost more than MATCH_BUDGET, so it holds what it may match, never skips it."""

    silence: Silence
    skip: bool
    costly: bool = False

    @property
    def until(self) -> float:
        return self.silence.endsAt

    @property
    def reason(self) -> str:
        """The delivery's `lastError`: which silence, who made it and why (`holder` reads the silence back)."""
        s = self.silence
        if self.skip:
            return f"{PREFIX}{s.id}: {s.comment}"  # SPEC's words
        why = "too costly to match, held until it ends" if self.costly else s.comment
        return f"{PREFIX}{s.id} ({s.createdBy}): {why}"


def _cost(silence: Silence, view: Mapping[str, Any]) -> int:
    """Its regex matchers' work on this delivery, at most: each one's text length times its program size."""
    texts = ((m, read(view, m.path)) for m in silence.compiled if m.regex is not None)
    return sum(len(text) * m.regex.programsize for m, text in texts if isinstance(text, str) and m.regex)


class Candidates:
    """Silences indexed by the kind or channel an equality matcher of theirs names, so that matching a delivery
    does not grow with the silences that cannot match it (built once per read of the hash)."""

    def __init__(self, silences: Iterable[Silence]) -> None:
        self.by: dict[tuple[str, str], list[Silence]] = {}
        self.rest: list[Silence] = []
        silences = list(silences)
        self.reads_notification = reads_notification(silences)
        for silence in silences:
            named = [(m.path[0], m.value) for m in silence.compiled if m.op is Op.EQ and m.path[0] in _INDEXED]
            if named:
                self.by.setdefault(named[0], []).append(silence)
            else:
                self.rest.append(silence)

    def __bool__(self) -> bool:
        return bool(self.by or self.rest)

    def of(self, view: Mapping[str, Any]) -> list[Silence]:
        return [*(s for name in _INDEXED for s in self.by.get((name, view[name]), [])), *self.rest]


def silenced(silences: Iterable[Silence] | Candidates, view: Mapping[str, Any], now: float) -> Silenced | None:
    """Whether an active silence matches the delivery `view` (`delivery_view`) at `now`. A skip wins over a
    hold (the operator said not to send it at all); among holds, the one that ends last: the delivery waits
    for all of them, with one wake-up."""
    candidates = silences if isinstance(silences, Candidates) else Candidates(silences)
    matching, costly, spent = [], [], 0
    for s in candidates.of(view):
        if not s.active(now) or not all(m.matches(view) for m in s.compiled if m.regex is None):
            continue  # its equality matchers first: one that fails costs no regex work
        cost = _cost(s, view)
        if spent + cost > MATCH_BUDGET:
            costly.append(s)  # not matched: the budget bounds one delivery's matching work
            continue
        spent += cost
        if all(m.matches(view) for m in s.compiled if m.regex is not None):
            matching.append(s)
    skips = [s for s in matching if s.action == SKIP]
    if skips:
        return Silenced(min(skips, key=lambda s: (s.startsAt, s.id)), True)
    if not matching and not costly:
        return None
    last = max([*matching, *costly], key=lambda s: (s.endsAt, s.id))
    return Silenced(last, False, last in costly)
