"""One `relay serve` per data_dir: an advisory lock (flock) on `data_dir/relay.lock`, held while it runs. The kernel
lets go of a flock when its holder exits, however it exits, and taking it is one atomic call."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from relay.config.source import ConfigError

LOCK_NAME = "relay.lock"


class DataDirBusy(ConfigError):
    """Another live process holds the data_dir's lock: the config's data_dir is to change (exit code 4)."""


def lock_data_dir(data_dir: Path) -> IO[str]:
    """Keep it open while the data_dir is in use. Raises DataDirBusy. Files open non-inheritable: children do not
    hold the lock, it goes with this process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    handle = (data_dir / LOCK_NAME).open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        by = f" (pid {holder})" if holder.isdigit() else ""
        raise DataDirBusy(
            f"data_dir {data_dir} is in use by another `relay serve`{by}: stop it, or give this one another data_dir"
        ) from None
    # The holder's pid, for the message above and for an operator; "a+" did not truncate before the lock.
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle
