"""Processes seen through Linux's /proc: the children of a process, and whether one still runs; and a
process started by a test stopped as an operator would."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any


def _stat(pid: int) -> tuple[str, int] | None:
    """A process's state letter and parent pid, or None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text[text.rindex(")") + 2 :].split()[:2]  # the name, in parentheses, may hold spaces
    return state, int(ppid)


def running(pid: int) -> bool:
    """The process exists and has not ended (a zombie, ended but not yet reaped, has)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def children(pid: int) -> list[int]:
    """The running processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid and stat[0] != "Z":
                found.append(int(entry.name))
    return sorted(found)


def stop(proc: subprocess.Popen[Any], timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it is still running after `timeout` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
