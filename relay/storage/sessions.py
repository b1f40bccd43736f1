"""The admin page's sessions that were logged out of, so that their cookie opens nothing any more, on any
API replica and after any restart: one key per session, kept until the cookie would have expired anyway
(relay.admin.ui_session makes and checks the cookies)."""

from __future__ import annotations

import hashlib
import math

from redis import Redis

from relay.storage.records import PREFIX

ENDED = PREFIX + "ui-session-ended:"  # + a hash of the session's nonce: a string key, expiring with the cookie


def _key(nonce: str) -> str:
    # The nonce comes from a cookie (signed, but the client's): hashed, so a key never holds a client's text.
    return ENDED + hashlib.sha256(nonce.encode()).hexdigest()[:32]


class EndedSessions:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def end(self, nonce: str, expiry: float, now: float) -> None:
        """Record the session as ended until `expiry`, when its cookie stops being valid by itself."""
        if expiry > now:
            self.redis.set(_key(nonce), "1", ex=math.ceil(expiry - now) + 60)  # past the check's leeway

    def ended(self, nonce: str) -> bool:
        return bool(self.redis.exists(_key(nonce)))
