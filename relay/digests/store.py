"""Open digests in Redis: gathering a delivery into the digest of its (route, channel, address), and closing a digest
to new items when it goes out (`relay.digests.sending` decides; the scripts are in `relay.storage.scripts`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from redis import Redis

from relay.core.model import Delivery
from relay.storage.lists import LISTS, list_key
from relay.storage.records import HELD, PREFIX, _text, delivery_key, delivery_to_hash, event_key, metric_field
from relay.storage.scripts import CLOSE_DIGEST, GATHER
from relay.storage.tally import Counts

OPEN_GRACE = 60.0  # seconds an open digest's key outlives its window: relay's clock closes it, the TTL cleans up


@dataclass(frozen=True)
class Gathered:
    digest_id: str
    items: int
    created: bool
    full: bool
    not_before: float | None


def open_digest_key(key: str) -> str:
    """Holds the id of the digest gathering for `key` (relay.digests.model.gather_key) and its window's end."""
    return f"{PREFIX}digest:open:{key}"


class Digests:
    def __init__(self, redis: Redis, retention: int, counts: Counts | None = None) -> None:
        self.redis = redis
        self.counts = counts if counts is not None else Counts()  # where this process counts
        self.retention = retention
        self._gather = redis.register_script(GATHER)
        self._close = redis.register_script(CLOSE_DIGEST)

    def open(self, key: str, now: float) -> str | None:
        """The digest gathering for this key at `now` (relay's clock), if one is."""
        ident, _, ends = _text(self.redis.get(open_digest_key(key)) or "").partition(" ")
        return ident if ends and float(ends) > now else None

    def gather(self, key: str, item: Delivery, new: Delivery, window: float, max_items: int) -> Gathered:
        """An item gathered before stays in the digest it joined then."""
        fields = delivery_to_hash(new)
        metric = metric_field("relay_deliveries_total", state=new.state, channel=new.channel, kind=new.kind)
        keys = [
            open_digest_key(key),
            delivery_key(item.id),
            list_key(new.state, new.channel, new.kind),
            HELD,
            self.counts.key,
            event_key(new.eventId),
            delivery_key(new.id),
            LISTS,
        ]
        # The window is relay's clock's (the script compares its end): the key's TTL only cleans up, after it.
        # The digest is kept from the end of its window: never removed while it gathers.
        cleanup = int((window + OPEN_GRACE) * 1000)
        args: list[Any] = [new.id, cleanup, max_items, item.id, self.retention + math.ceil(window)]
        args += [repr(new.createdAt), metric, repr(new.notBefore or new.createdAt)]
        args += [delivery_key(""), len(fields)]
        for pair in fields.items():
            args.extend(pair)
        ident, count, created, full, not_before = self._gather(keys=keys, args=args)
        at = _text(not_before)
        return Gathered(_text(ident), int(count), bool(int(created)), bool(int(full)), float(at) if at else None)

    def close(self, key: str, digest_id: str) -> list[str]:
        """Close the digest to new items; the deliveries it carries, in the order they joined."""
        raw = self._close(keys=[open_digest_key(key), delivery_key(digest_id)], args=[digest_id])
        return [str(i) for i in json.loads(_text(raw))]
