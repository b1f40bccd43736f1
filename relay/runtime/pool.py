"""`relay serve`'s worker processes (docs/container.md, "Supervision"): started and restarted by the one loop
(`relay.runtime.restarts.Keeper`), told relay serve's pid (`PARENT_PID_ENV`), and stopped within a deadline: SIGTERM
to all at once (`begin_stop`), SIGKILL to any left `STOP_SECONDS` later."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import IO

from relay.core.redaction import Redactor
from relay.runtime.children import PARENT_PID_ENV, die_with_parent
from relay.runtime.restarts import DEFAULT_POLICY, POLL_SECONDS, Backoff, Keeper, Policy, Slot, describe_exit

log = logging.getLogger("relay.serve")
# From the stop's start to SIGKILL: with the embedded Redis's stop after it, relay serve stops within 20 s.
STOP_SECONDS = 15.0


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    pump: threading.Thread | None = None
    context: Hashable = None  # what `Workers.context` said at its start
    last_line: list[str] = field(default_factory=lambda: [""])  # written by the pump thread


class Workers(Keeper[Child]):
    def __init__(
        self,
        count: int,
        command: list[str],
        env: dict[str, str],
        on_give_up: Callable[[], None] = lambda: None,
        policy: Policy = DEFAULT_POLICY,
        poll: float = POLL_SECONDS,
        stop_seconds: float = STOP_SECONDS,
        context: Callable[[], Hashable] = lambda: 0,
        redactor: Redactor | None = None,
    ) -> None:
        slots: list[Slot[Child]] = [Slot(Backoff("a worker", policy)) for _ in range(count)]
        super().__init__("relay-workers", slots, on_give_up, poll)
        self.args = command  # how to start one worker (`relay worker ...`)
        self.env = {**env, PARENT_PID_ENV: str(os.getpid())}
        # What a worker needs from relay serve (its embedded Redis: which one runs, None while none does):
        # a worker that ends while it is None or after it changed did not fail to start by itself.
        self.context = context
        self.redactor = redactor if redactor is not None else Redactor()  # the process's: a line may quote a secret
        self.stop_seconds = stop_seconds
        self.deadline: float | None = None

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [s.child.proc for s in self.slots if s.child is not None and s.child.proc.poll() is None]

    def _ended(self, child: Child) -> tuple[str, str, bool] | None:
        if child.proc.poll() is None:
            return None
        if child.pump is not None:
            child.pump.join(1.0)  # its last lines, which the pipe may still hold
        now_context = self.context()
        excused = now_context is None or child.context is None or now_context != child.context
        how = describe_exit(child.proc.returncode)
        line = self.redactor.scrub(child.last_line[0])  # a worker's log lines are scrubbed already; a traceback not
        how += f" (its last line on stderr: {line})" if line else " (nothing on stderr)"
        return f"worker {child.proc.pid}", how, excused

    def _not_started(self, exc: Exception) -> tuple[str, str]:
        return "a worker", f"did not start ({exc})"

    def _spawn(self) -> Child:
        proc = subprocess.Popen(
            self.args,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C reaches relay serve alone, which stops the workers in order
            preexec_fn=die_with_parent,
        )
        child = Child(proc, context=self.context())
        if proc.stderr is not None:
            child.pump = threading.Thread(target=_pump, args=(proc.stderr, child.last_line), daemon=True)
            child.pump.start()
        return child

    def begin_stop(self) -> None:
        """SIGTERM to every worker now (each finishes the delivery in hand); the SIGKILL deadline starts now."""
        if self.deadline is None:
            self.deadline = time.monotonic() + self.stop_seconds
        self.stopping.set()
        for proc in self.live():
            proc.terminate()

    def stop(self) -> None:
        self.begin_stop()
        if self.thread.is_alive():
            self.thread.join()  # it starts no worker once stopping is set
        for proc in self.live():
            proc.terminate()  # one started while the stop began
        assert self.deadline is not None
        for proc in [s.child.proc for s in self.slots if s.child is not None]:
            try:
                proc.wait(max(0.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d still running %.0f s after SIGTERM: killed", proc.pid, self.stop_seconds)
                proc.kill()
                proc.wait()
        for slot in self.slots:
            if slot.child is not None and slot.child.pump is not None:
                slot.child.pump.join(1.0)


def _pump(stream: IO[bytes], last: list[str]) -> None:
    """A worker's stderr, copied line by line to ours; its last non-blank line kept in `last`."""
    with stream:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace")
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError):  # our stderr closed: the line is still kept below
                pass
            if line.strip():
                last[0] = line.strip()
