"""Silences in Redis: one hash, id -> the silence's JSON (relay.silences.model), and a token changed with every
write, so that a process reads the hash again only when it changed (each delivery that comes due asks). One that
cannot be read (a hand edit, a corruption) is logged and left out, as an unreadable delivery is: no listing, page,
expiry or hold decision fails for it. What a silence holds is indexed by it (`relay:silence:<id>:held`), so that
its early end finds them without reading every held delivery."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis import Redis

from relay.core.times import LAST
from relay.silences.model import MAX_SILENCES, Candidates, Silence
from relay.storage.records import PREFIX, _text

SILENCES = PREFIX + "silences"
VERSION = SILENCES + ":version"  # a new random token with every write of the hash
# Expired silences stay listed this long after their end, as Alertmanager keeps them (120h).
KEPT_EXPIRED = 5 * 86400.0
log = logging.getLogger("relay.silences.store")


@functools.lru_cache(maxsize=4 * MAX_SILENCES)  # the active and pending, and the expired ones kept
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


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class _Read:
    seen: tuple[Any, ...]
    found: list[Silence]
    candidates: Candidates
    until: float


def held_key(ident: str) -> str:
    return f"{SILENCES}:{ident}:held"


class Silences:
    # The last read of the hash (per process): its (token, length), what it held and, until the first of them
    # ends, those not expired indexed. Read again when the token or the length moves, or that end passed.
    _last: _Read | None = None

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def all(self) -> list[Silence]:
        """Every silence kept that can be read, oldest start first."""
        return self._read().found

    def candidates(self, now: float) -> Candidates:
        """Those not expired, indexed (`silenced` asks which are active)."""
        return self._read(now).candidates

    def _read(self, now: float = 0.0) -> _Read:
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(VERSION)
        pipe.hlen(SILENCES)
        seen = tuple(pipe.execute())
        last = Silences._last
        if last is not None and last.seen == seen and seen[0] is not None and now < last.until:
            return last
        found = sorted(readable(self.redis.hgetall(SILENCES)), key=lambda s: (s.startsAt, s.id))
        unexpired = [s for s in found if s.endsAt > now]
        Silences._last = _Read(seen, found, Candidates(unexpired), min((s.endsAt for s in unexpired), default=LAST))
        return Silences._last

    def get(self, ident: str) -> Silence | None:
        """The silence; None when there is none, or none that can be read."""
        raw = self.redis.hget(SILENCES, ident)
        return parsed(ident, raw) if raw is not None else None

    def put(self, silence: Silence) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(SILENCES, silence.id, silence.to_json())
        pipe.set(VERSION, new_id())
        pipe.execute()

    def unexpired(self, now: float) -> int:
        return sum(1 for s in self.all() if s.endsAt > now)

    def prune(self, now: float) -> int:
        """How many; one that cannot be read is left for whoever looks at it."""
        old = [s.id for s in self.all() if s.endsAt < now - KEPT_EXPIRED]
        if old:
            pipe = self.redis.pipeline(transaction=True)
            pipe.hdel(SILENCES, *old)
            pipe.delete(*(held_key(ident) for ident in old))
            pipe.set(VERSION, new_id())
            pipe.execute()
        return len(old)

    def holds(self, ident: str, until: float, delivery_id: str, now: float) -> None:
        """`ident` holds the delivery (indexed before its state is stored: the index holds at least those); kept
        until the silence has long ended, counted from relay's clock (`now`), not Redis's."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.sadd(held_key(ident), delivery_id)
        pipe.expire(held_key(ident), max(1, int(until - now + KEPT_EXPIRED)))
        pipe.execute()

    def lets_go(self, ident: str, delivery_id: str) -> None:
        self.redis.srem(held_key(ident), delivery_id)

    def held(self, ident: str) -> list[str]:
        """The deliveries `ident` holds (or held, until each is asked again)."""
        return sorted(_text(d) for d in self.redis.smembers(held_key(ident)))
