"""The version of relay's stored layout (`relay:schema`): written by the first process that builds a runtime on an
empty store, and checked by every one at start (`relay.runtime.bootstrap.build`), so that no relay reads or writes a
layout it does not know. A change of the layout comes with a new version and one migration, here (CHANGELOG.md)."""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import RedisError

from relay.storage.records import PREFIX, _text

SCHEMA_KEY = PREFIX + "schema"
SCHEMA = 1

log = logging.getLogger("relay.storage")


class SchemaRefused(ValueError):
    """The store holds a layout this relay does not read; the message says what to do."""


def check_schema(redis: Redis) -> None:
    """Write SCHEMA into an empty store, or check the version stored; SchemaRefused for another version, or for
    relay's keys with none. A Redis unreachable now is logged and left to the commands that reach it later."""
    try:
        found = _stored(redis)
    except RedisError as exc:
        log.warning("stored layout not checked: Redis unreachable at start (%s)", type(exc).__name__)
        return
    if found is not None and found != str(SCHEMA):
        raise SchemaRefused(
            f"Redis holds relay's stored layout schema {found!r}, and this relay reads schema {SCHEMA}: run the"
            " relay that wrote it, or one whose CHANGELOG.md names a migration from it"
        )


def _stored(redis: Redis) -> str | None:
    """The version stored, SCHEMA written when the store holds none of relay's keys."""
    found = redis.get(SCHEMA_KEY)
    if found is None:
        if next(redis.scan_iter(match=PREFIX + "*", count=1000), None) is None:
            redis.set(SCHEMA_KEY, SCHEMA, nx=True)
        found = redis.get(SCHEMA_KEY)  # ours, or another's starting meanwhile (written before any of its keys)
    if found is None:
        raise SchemaRefused(
            f"Redis holds relay's keys ({PREFIX}*) but no {SCHEMA_KEY}: a layout from before schema {SCHEMA}, which"
            f" this relay does not read; start on an empty Redis database, or delete the {PREFIX}* keys first"
        )
    return _text(found)
