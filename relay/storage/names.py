"""The names payloads gave the people relay sent to (relay.core.names.payload_names), kept for their pages:
a person's page has no payload to read the name from. One short string per person, for as long as their
page lists what they were sent, renewed with each message."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from redis import Redis

from relay.preferences.store import SEEN_DAYS
from relay.storage.records import PREFIX, _text

NAMES = PREFIX + "name:"
TTL = SEEN_DAYS * 86400


def name_key(person: str) -> str:
    # Hashed: a person comes from payloads (STYLE.md, "Keys built from payload values are hashed or escaped").
    return NAMES + hashlib.sha256(person.encode()).hexdigest()[:32]


class KnownNames:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def remember(self, names: Mapping[str, str]) -> None:
        if not names:
            return
        pipe = self.redis.pipeline(transaction=False)
        for person, name in names.items():
            pipe.set(name_key(person), name, ex=TTL)
        pipe.execute()

    def get(self, person: str) -> str | None:
        found = self.redis.get(name_key(person))
        return None if found is None else _text(found)
