"""People's preferences in Redis (docs/preferences.md, "Admin API and command line"): one JSON value per person,
never expiring, read by the gates as each delivery to one person comes due (a change counts from the next one due); an
index of the people who have any (for export); and what each person was sent lately (for their page)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from redis import Redis
from redis.client import Pipeline

from relay.preferences.model import Preference, check_person, from_stored
from relay.storage.records import PREFIX, _text

PREFERENCES = PREFIX + "prefs"  # set of the people who have preferences
# userRef -> the address relay first sent that person's links to (relay.preferences.sending.link_person)
ADDRESSES = PREFIX + "person-address"
SEEN_DAYS = 30  # what a person's page lists: the kinds sent to them over this many days
_DAY = 86400
_SEP = "\x1f"


def preference_key(person: str) -> str:
    return f"{PREFERENCES}:{person}"


def seen_key(person: str) -> str:
    return f"{PREFIX}seen:{person}"


class Preferences:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def get(self, person: str) -> Preference | None:
        return self.get_many([person]).get(person)

    def get_many(self, people: Iterable[str]) -> dict[str, Preference]:
        """The preferences of these people (those who have any), in one round trip."""
        wanted = list(dict.fromkeys(people))
        if not wanted:
            return {}
        found: dict[str, Preference] = {}
        for person, raw in zip(wanted, self.redis.mget([preference_key(p) for p in wanted]), strict=True):
            pref = _read(raw)
            if pref is not None:
                found[person] = pref
        return found

    def bound_address(self, ref: str, address: str) -> str:
        """The first address ever asked about (trust on first use, as SSH keeps a host's key), in one round trip."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hsetnx(ADDRESSES, ref, address)
        pipe.hget(ADDRESSES, ref)
        return _text(pipe.execute()[1])

    def bound_to(self, address: str) -> list[str]:
        """The `userRef`s whose own address this is (`bound_address`): their choices govern it too."""
        return sorted(_text(ref) for ref, bound in self.redis.hscan_iter(ADDRESSES) if _text(bound) == address)

    def unbind(self, ref: str) -> bool:
        """Forget `ref`'s address (its e-mail changed): the next one its links go to is bound instead."""
        return bool(self.redis.hdel(ADDRESSES, ref))

    def put(self, preference: Preference, at: float) -> Preference:
        """Store (replace) one person's preferences, stamped `at`."""
        preference.updatedAt = at
        _check(preference)
        pipe = self.redis.pipeline(transaction=True)
        _write(pipe, preference)
        pipe.execute()
        return preference

    def update(self, person: str, change: Callable[[Preference], bool], at: float) -> Preference:
        """Where they stand (a one-click opt-out while the page saves: both count). PreferenceError, nothing stored,
        for a person or a change that could not be read back."""
        person = check_person(person)
        key = preference_key(person)
        result: list[Preference] = []

        def attempt(pipe: Pipeline) -> None:
            current = _read(pipe.get(key)) or Preference(person)
            result[:] = [current]
            if change(current):
                current.updatedAt = at
                _check(current)
                pipe.multi()
                _write(pipe, current)

        self.redis.transaction(attempt, key)
        return result[0]

    def people(self) -> list[str]:
        return sorted(_text(p) for p in self.redis.sscan_iter(PREFERENCES, count=500))

    def export(self) -> Iterator[Preference]:
        """Everyone's preferences, by person, read a page at a time."""
        people = self.people()
        for start in range(0, len(people), 500):
            yield from self.get_many(people[start : start + 500]).values()  # in the order asked

    def import_many(self, preferences: Iterable[Preference]) -> int:
        """Store preferences as exported (their `updatedAt` kept); returns how many."""
        count = 0
        pipe = self.redis.pipeline(transaction=False)
        for pref in preferences:
            _check(pref)
            _write(pipe, pref)
            count += 1
            if count % 500 == 0:
                pipe.execute()
        pipe.execute()
        return count

    def note_sent(self, sent: Iterable[tuple[str, str, str]], at: float) -> None:
        """Count deliveries planned to people: (person, kind, channel) each; one round trip."""
        day = int(at // _DAY)
        pipe = self.redis.pipeline(transaction=False)
        people: set[str] = set()
        for person, kind, channel in sent:
            pipe.hincrby(seen_key(person), _SEP.join((kind, channel, str(day))), 1)
            people.add(person)
        for person in people:
            pipe.expire(seen_key(person), (SEEN_DAYS + 1) * _DAY)
        if people:
            pipe.execute()

    def sent(self, person: str, at: float, days: int = SEEN_DAYS) -> dict[tuple[str, str], int]:
        """(kind, channel) -> how many were sent to this person over the last `days` days."""
        first = int(at // _DAY) - days + 1
        counts: dict[tuple[str, str], int] = {}
        for raw_field, raw_count in self.redis.hgetall(seen_key(person)).items():
            parts = _text(raw_field).split(_SEP)
            if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < first:
                continue
            pair = (parts[0], parts[1])
            counts[pair] = counts.get(pair, 0) + int(raw_count)
        return counts


def _read(raw: Any) -> Preference | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return from_stored(data) if isinstance(data, dict) else None
    except ValueError:
        return None


def _check(preference: Preference) -> None:
    """A value reading would refuse is never written: no change is answered done and then ignored."""
    from_stored(preference.stored())


def _write(pipe: Pipeline, preference: Preference) -> None:
    pipe.set(preference_key(preference.person), json.dumps(preference.stored(), separators=(",", ":")))
    pipe.sadd(PREFERENCES, preference.person)
