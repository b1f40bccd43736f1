"""`relay.runtime.children`: a process forked by one that asked for it gets SIGTERM when its parent dies,
even by SIGKILL; without the ask it lives on as an orphan (what RQ's forked scheduler did)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.processes import running
from tests.servers import wait_for

# A parent that forks (as RQ forks its scheduler: multiprocessing's fork context) a child that sleeps,
# prints the child's pid, then waits to be killed.
PARENT = """
import multiprocessing, sys, time
from relay.runtime.children import forks_die_with_this_process
if sys.argv[1] == "ask":
    forks_die_with_this_process()
child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,))
child.start()
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("ask", [True, False])
def test_a_forked_child_dies_with_its_sigkilled_parent_only_if_asked(ask: bool) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, "ask" if ask else "no"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        if ask:
            wait_for(lambda: not running(child), timeout=5)
        else:
            with pytest.raises(AssertionError):
                wait_for(lambda: not running(child), timeout=1)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child and running(child):
            os.kill(child, signal.SIGKILL)
        if parent.stdout is not None:
            parent.stdout.close()
