"""Who a person's page says it is for: their name as the runtime finds it, waited for at most NAME_WAIT, else
their readable reference. A page never waits long on the platform, nor fails for it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import anyio.to_thread

from relay.core.names import clean_name, readable_ref

log = logging.getLogger("relay.people")
NAME_WAIT = 1.0  # seconds a page waits for a person's name

NameOf = Callable[[str], str | None]


async def shown_name(name_of: NameOf | None, person: str) -> str:
    found: str | None = None
    if name_of is not None:
        with anyio.move_on_after(NAME_WAIT):
            try:  # a look-up still running when the page stops waiting ends on its own (its answer is cached)
                found = await anyio.to_thread.run_sync(name_of, person, abandon_on_cancel=True)
            except Exception as exc:  # a name is never worth an error page
                log.warning("a person's name was not found, their reference shown: %s", type(exc).__name__)
    return clean_name(found) or readable_ref(person)
