"""Whether this worker was asked to stop, for a wake-up job that lingers (`relay.delivery.jobs.work`).

RQ's worker owns SIGTERM and SIGINT: it installs its handlers when it starts working, and again when a first
signal arrives (the second then stops at once). A job that listens for more work must end at a stop instead
of lingering on, so from each job's start (RQ runs jobs in the main thread) whatever handler is installed is
wrapped, through the standard library's `signal` alone: the wrapper notes the stop and then calls the handler
it wrapped, so RQ's own behaviour on each signal is unchanged. A handler RQ installs later is wrapped in turn
at the next question; an ignored signal is left ignored.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopWatch:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._ours: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def requested(self) -> bool:
        """Whether a stop was asked for; asked in the main thread, it first wraps whatever handler is
        installed and is not ours (RQ's, at the first question and after each signal)."""
        if threading.current_thread() is threading.main_thread():  # only there may handlers be set
            for signum in SIGNALS:
                if signal.getsignal(signum) is not self._ours.get(signum):
                    self._wrap(signum)
        return self._stop.is_set()

    def request(self) -> None:
        self._stop.set()

    def _wrap(self, signum: int) -> None:
        previous = signal.getsignal(signum)

        if previous == signal.SIG_IGN:
            return  # an ignored signal stops nothing

        def noted(sig: int, frame: FrameType | None) -> None:
            self._stop.set()
            if callable(previous):
                previous(sig, frame)
            else:  # SIG_DFL: what the signal would have done without us
                signal.signal(sig, signal.SIG_DFL)
                os.kill(os.getpid(), sig)

        self._ours[signum] = noted
        signal.signal(signum, noted)
