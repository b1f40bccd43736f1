"""A worker's heartbeat on this machine, for `relay health --worker` (docs/container.md): a file in the temporary
directory ($TMPDIR, else /tmp) touched at each beat that reached Redis, gone when the worker stops. A worker serves
no HTTP, and this file says what its beat in Redis says without asking Redis which beat is this container's."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

NAME = "relay-worker.beat"


def beat_file() -> Path:
    return Path(tempfile.gettempdir()) / NAME


def touch() -> None:
    """A beat; a temporary directory that cannot be written only leaves the health check without one."""
    with contextlib.suppress(OSError):
        beat_file().touch()


def remove() -> None:
    with contextlib.suppress(OSError):
        beat_file().unlink()


def last_beat() -> float | None:
    """When the last beat was (the wall clock's time), or None if no worker beats here."""
    try:
        return beat_file().stat().st_mtime
    except OSError:
        return None
