"""Silences in Redis: one hash, id -> the silence's JSON (relay.core.silences), read whole by every planning
and every delivery that comes due (a silence is seen at once, by every worker, and survives restarts)."""

from __future__ import annotations

import functools
import uuid

from redis import Redis

from relay.core.silences import Silence
from relay.storage.records import PREFIX, _text

SILENCES = PREFIX + "silences"
# Expired silences stay listed this long after their end, as Alertmanager keeps them (120h).
KEPT_EXPIRED = 5 * 86400.0


@functools.lru_cache(maxsize=256)
def parsed(raw: str) -> Silence:
    """A stored silence, parsed and its matchers compiled once per process (a pure function of its text:
    each planning and each due delivery reads them all, and RE2 compiles are not free)."""
    return Silence.from_json(raw)


def new_id() -> str:
    return str(uuid.uuid4())


class Silences:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def all(self) -> list[Silence]:
        """Every silence kept, oldest start first (one round trip; none stored: an empty answer, at once)."""
        found = [parsed(_text(v)) for v in self.redis.hvals(SILENCES)]
        return sorted(found, key=lambda s: (s.startsAt, s.id))

    def active(self, now: float) -> list[Silence]:
        return [s for s in self.all() if s.active(now)]

    def get(self, ident: str) -> Silence | None:
        raw = self.redis.hget(SILENCES, ident)
        return parsed(_text(raw)) if raw is not None else None

    def put(self, silence: Silence) -> None:
        self.redis.hset(SILENCES, silence.id, silence.to_json())

    def prune(self, now: float) -> int:
        """Forget the silences that ended more than KEPT_EXPIRED ago; how many."""
        old = [s.id for s in self.all() if s.endsAt < now - KEPT_EXPIRED]
        if old:
            self.redis.hdel(SILENCES, *old)
        return len(old)
