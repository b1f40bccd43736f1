"""The names recipients read (relay.core.names) that the payload alone does not give: the platform catalog's,
for the references a render shows that the payload names no one for; and a person's name for their own page
(the one a payload gave them, kept when they were sent a message, else the catalog's). None of it ever fails
what asked, nor makes it wait long: a name not found is the reference's readable form."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from redis import Redis
from redis.exceptions import RedisError

from relay.core.model import Delivery, Notification
from relay.core.names import Lookup, payload_names
from relay.delivery.catalog import Catalog, CatalogUnavailable
from relay.storage.names import KnownNames

log = logging.getLogger("relay.delivery.names")
MAX_LOOKUPS = 20  # references one render asks the catalog about; the rest show their readable form
LOOKUP_BUDGET = 3.0  # seconds one render spends asking (each ask: at most catalog.NAME_TIMEOUT)


def catalog_lookup(catalog: Catalog | None) -> Lookup | None:
    """What a render asks for the names the payload lacks (None without a catalog). It never raises: the
    first failure of the platform ends the asking, and the names not found are shown readable."""
    if catalog is None:
        return None

    def lookup(refs: Sequence[str]) -> Mapping[str, str]:
        found: dict[str, str] = {}
        deadline = time.monotonic() + LOOKUP_BUDGET
        for ref in refs[:MAX_LOOKUPS]:
            if time.monotonic() > deadline:
                break
            try:
                name = catalog.display_name(ref)
            except CatalogUnavailable as exc:
                log.info("names not looked up in the platform catalog, references shown instead: %s", exc)
                break
            except Exception as exc:  # a name is never worth a message: shown readable
                log.warning("name look-up failed, references shown instead: %s: %s", type(exc).__name__, exc)
                break
            if name:
                found[ref] = name
        return found

    return lookup


def remember_names(redis: Redis, notification: Notification, record: Delivery) -> None:
    """Keep the names the payload gives the delivery's recipient for their page: its reference's under the
    reference, its address's under the address. Never one's under the other: the payload's pairing of the two
    is only a claim (relay.preferences.sending.link_person), and a page names only its own person."""
    given = payload_names(notification)
    persons = {p for p in (record.recipient, (record.address or "").lower()) if p}
    found = {p: given[p] for p in persons if p in given}
    if not found:
        return
    try:
        KnownNames(redis).remember(found)
    except RedisError:
        log.info("a recipient's name was not kept for their page: Redis did not answer")


def person_name(redis: Redis, catalog: Catalog | None, person: str) -> str | None:
    """A person's name for their page: the one a payload gave them, else the catalog's; None if neither."""
    try:
        known = KnownNames(redis).get(person)
    except RedisError:
        known = None
    if known or catalog is None:
        return known
    try:
        return catalog.display_name(person)
    except CatalogUnavailable:
        return None
