"""Silences in Redis: one hash, id -> the silence's JSON (relay.silences.model), read whole by every planning
and every delivery that comes due (a silence is seen at once, by every worker, and survives restarts). One
that cannot be read (a hand edit, a corruption) is logged and left out, as an unreadable delivery is: no
listing, page, expiry or hold decision fails for it."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping

from redis import Redis

from relay.silences.model import Silence
from relay.storage.records import PREFIX

SILENCES = PREFIX + "silences"
# Expired silences stay listed this long after their end, as Alertmanager keeps them (120h).
KEPT_EXPIRED = 5 * 86400.0
log = logging.getLogger("relay.silences.store")


@functools.lru_cache(maxsize=256)
def parsed(ident: str, raw: bytes | str) -> Silence | None:
    """Parsed once per process (each due delivery reads them all; RE2 compiles are not free); None, logged once,
    for one that cannot be read."""
    try:
        silence = Silence.from_json(raw)
        if silence.id != ident:
            raise ValueError(f"it names itself {silence.id!r}")
    except (ValueError, KeyError, TypeError) as exc:  # JSON, UTF-8, a matcher, a time, a field: all ValueErrors
        why = f"{type(exc).__name__}: {exc}"
        log.error("silence %r unreadable (%s): left out; fix or remove it (HDEL %s)", ident, why, SILENCES)
        return None
    return silence


def readable(stored: Mapping[bytes | str, bytes | str]) -> list[Silence]:
    """The silences of the hash as HGETALL answers it, those that can be read."""
    found = (parsed(_text(ident), raw) for ident, raw in stored.items())
    return [s for s in found if s is not None]


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def new_id() -> str:
    return str(uuid.uuid4())


class Silences:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def all(self) -> list[Silence]:
        """Every silence kept that can be read, oldest start first."""
        return sorted(readable(self.redis.hgetall(SILENCES)), key=lambda s: (s.startsAt, s.id))

    def active(self, now: float) -> list[Silence]:
        return [s for s in self.all() if s.active(now)]

    def get(self, ident: str) -> Silence | None:
        """The silence; None when there is none, or none that can be read."""
        raw = self.redis.hget(SILENCES, ident)
        return parsed(ident, raw) if raw is not None else None

    def put(self, silence: Silence) -> None:
        self.redis.hset(SILENCES, silence.id, silence.to_json())

    def prune(self, now: float) -> int:
        """How many; one that cannot be read is left for whoever looks at it."""
        old = [s.id for s in self.all() if s.endsAt < now - KEPT_EXPIRED]
        if old:
            self.redis.hdel(SILENCES, *old)
        return len(old)
