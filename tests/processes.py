"""Processes seen through Linux's /proc: the children of a process, and whether one still runs; and a
process started by a test stopped as an operator would."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
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
    stop_all([proc], timeout)


def stop_all(procs: list[subprocess.Popen[Any]], timeout: float = 30) -> None:
    """SIGTERM to every one at once (their stops overlap), then SIGKILL to those still running `timeout`
    seconds later."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Restarted:
    """A process started again whenever it exits (as Kubernetes restarts a container) until `stop`; its output
    appended to `log`."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args, self.log = args, log
        self.stopping = threading.Event()
        self.starts = 0
        self.proc = self._spawn()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        with self.log.open("ab") as out:  # a file, not a pipe: a pipe nobody reads would block the process
            return subprocess.Popen(self.args, stdout=out, stderr=out)

    def _watch(self) -> None:
        while not self.stopping.wait(0.2):
            if self.proc.poll() is not None:
                self.proc = self._spawn()

    def halt(self) -> subprocess.Popen[bytes]:
        """No more restarts: the process running now, for the caller to stop."""
        self.stopping.set()
        self.thread.join()
        return self.proc

    def stop(self) -> None:
        stop(self.halt())


def kill(server: Any) -> None:
    """SIGKILL to a server a test started (an `EmbeddedRedis`), reaped."""
    if server.proc is not None and server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()
