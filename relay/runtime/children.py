"""relay's child processes die with their parent, even SIGKILLed: Linux's PR_SET_PDEATHSIG has the kernel send them
SIGTERM. The signal goes when the *thread* that forked the child ends: relay starts its children from threads that
live as long as their process, or says why not."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

PARENT_PID_ENV = "RELAY_PARENT_PID"  # set by `relay serve` for its workers
_PR_SET_PDEATHSIG = 1
try:
    # Loaded once, here: a forked child of a process with threads must not go through the dynamic loader,
    # whose lock another thread may have held at the fork.
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not Linux with glibc: children are stopped only the orderly way
    _LIBC = None


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if relay dies, so nothing is left behind even on SIGKILL."""
    if _LIBC is not None:
        with contextlib.suppress(OSError):
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def parent_gone() -> bool:
    """For one the signal missed: an orphan's parent becomes PID 1 or a subreaper (relay serve may be PID 1)."""
    expected = os.environ.get(PARENT_PID_ENV, "")
    return expected.isdigit() and os.getppid() != int(expected)


def forks_die_with_this_process() -> None:
    """From now on, every child this process forks gets SIGTERM when it dies."""
    forking_pid = 0

    def before() -> None:
        nonlocal forking_pid
        forking_pid = os.getpid()

    def after_in_child() -> None:
        die_with_parent()
        if os.getppid() != forking_pid:
            # The parent died between the fork and the line above, so no signal will come: end now. (RQ's
            # scheduler lock, taken by the parent before the fork, then runs out by itself, in 61 s.)
            os._exit(0)

    os.register_at_fork(before=before, after_in_child=after_in_child)
