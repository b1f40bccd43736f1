"""The data_dir lock of `relay serve`: one holder at a time, and a holder killed with SIGKILL leaves no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from relay.runtime.datalock import LOCK_NAME, DataDirBusy, lock_data_dir
from tests.servers import wait_for

HOLD = "import sys, time; from pathlib import Path; from relay.runtime.datalock import lock_data_dir\n" + (
    "held = lock_data_dir(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)"
)


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(DataDirBusy) as refused:
            lock_data_dir(tmp_path)
        assert str(refused.value) == (
            f"data_dir {tmp_path} is in use by another `relay serve` (pid {holder.pid}): "
            "stop it, or give this one another data_dir"
        )
        assert (tmp_path / LOCK_NAME).read_text() == f"{holder.pid}\n"  # the refused one changed nothing
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    # Killed: the kernel let go of its lock; the file it left does not block the next holder.
    lock = wait_for(lambda: _try_lock(tmp_path), timeout=5)
    try:
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    finally:
        lock.close()


def test_the_lock_is_free_again_once_closed(tmp_path: Path) -> None:
    first = lock_data_dir(tmp_path / "new")  # creates the directory
    with pytest.raises(DataDirBusy):
        lock_data_dir(tmp_path / "new")  # flock locks are per open file: the same process is refused too
    first.close()
    lock_data_dir(tmp_path / "new").close()


def _try_lock(path: Path) -> IO[str] | None:
    try:
        return lock_data_dir(path)
    except DataDirBusy:
        return None
