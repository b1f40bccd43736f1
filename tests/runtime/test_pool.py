"""`relay serve`'s worker pool on real processes (small Python programs standing in for `relay worker`, on a
fast back-off): a worker that cannot start is given up on with its cause; the stop is over by its deadline
whatever the workers do; a worker knows relay serve's pid."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from relay.runtime.children import PARENT_PID_ENV, parent_gone
from relay.runtime.pool import Workers
from relay.runtime.restarts import Policy
from tests.processes import children, running
from tests.servers import wait_for

FAST = Policy(first_delay=0.01, max_delay=0.05, give_up_after=3)


def _program(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "worker.py"
    path.write_text(text)
    return [sys.executable, str(path)]


def test_a_worker_that_cannot_start_is_given_up_on_with_its_exit_code_and_last_line(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    command = _program(
        tmp_path,
        f"import sys\nopen({str(starts)!r}, 'a').write('x')\n"
        "print('a line on stdout')\nsys.stderr.write('starting\\nboom: no such queue\\n\\n')\nsys.exit(7)\n",
    )
    gave_up = threading.Event()
    pool = Workers(1, command, dict(os.environ), gave_up.set, FAST, poll=0.01).start()
    try:
        assert gave_up.wait(20)
        assert pool.failure is not None
        assert "failed to start 3 times in a row" in pool.failure
        assert "exited with code 7 (its last line on stderr: boom: no such queue)" in pool.failure
        time.sleep(0.1)
        assert starts.read_text() == "xxx" and pool.live() == []  # none started once given up
    finally:
        pool.stop()


def test_no_worker_is_given_up_on_while_what_it_needs_is_away(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    command = _program(tmp_path, f"import sys\nopen({str(starts)!r}, 'a').write('x')\nsys.exit(2)\n")
    redis: list[int | None] = [None]  # relay serve's embedded Redis: down, being brought back
    gave_up = threading.Event()
    pool = Workers(1, command, dict(os.environ), gave_up.set, FAST, poll=0.01, context=lambda: redis[0]).start()
    try:
        wait_for(lambda: len(starts.read_text()) >= 4 if starts.exists() else False, timeout=20)
        assert not gave_up.is_set()
        redis[0] = 4242  # back, and it stays: now the failed starts count
        assert gave_up.wait(20)
    finally:
        pool.stop()


def test_every_stop_ends_by_its_deadline_workers_that_ignore_sigterm_or_are_mid_restart_included(
    tmp_path: Path,
) -> None:
    # Each "worker" ignores SIGTERM and ends a moment after its start: two slots restarting all the time.
    command = _program(
        tmp_path,
        "import signal, time, random\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "time.sleep(random.uniform(0.05, 0.3))\n",
    )
    steady = Policy(first_delay=0.0, max_delay=0.0, start_window=0.0)  # never a failed start: no give-up
    pool = Workers(2, command, dict(os.environ), policy=steady, poll=0.01, stop_seconds=0.5).start()
    wait_for(lambda: len(pool.live()) == 2, timeout=10)
    time.sleep(0.5)
    started = time.monotonic()
    pool.stop()
    took = time.monotonic() - started
    assert took < 0.5 + 1.5
    assert pool.failure is None
    assert [p for p in children(os.getpid()) if command[1] in Path(f"/proc/{p}/cmdline").read_text()] == []


def test_a_worker_ends_on_sigterm_well_before_the_deadline(tmp_path: Path) -> None:
    command = _program(tmp_path, "import time\ntime.sleep(60)\n")
    pool = Workers(2, command, dict(os.environ), poll=0.01, stop_seconds=30).start()
    procs = wait_for(lambda: pool.live() if len(pool.live()) == 2 else None, timeout=10)
    started = time.monotonic()
    pool.stop()
    assert time.monotonic() - started < 5
    assert not any(running(p.pid) for p in procs)


def test_a_worker_is_told_relay_serves_pid(tmp_path: Path) -> None:
    out = tmp_path / "seen"
    command = _program(
        tmp_path,
        f"import os\nopen({str(out)!r}, 'w').write(os.environ[{PARENT_PID_ENV!r}] + ' ' + str(os.getppid()))\n",
    )
    pool = Workers(1, command, dict(os.environ), poll=0.01).start()
    try:
        wait_for(lambda: out.exists() and out.read_text(), timeout=10)
    finally:
        pool.stop()
    assert out.read_text() == f"{os.getpid()} {os.getpid()}"


def test_parent_gone_compares_the_parent_with_the_pid_relay_serve_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PARENT_PID_ENV, raising=False)
    assert not parent_gone()  # not started by relay serve
    monkeypatch.setenv(PARENT_PID_ENV, str(os.getppid()))
    assert not parent_gone()  # whatever that pid is: 1 too, when relay serve is a container's PID 1
    monkeypatch.setenv(PARENT_PID_ENV, str(os.getppid() + 100000))
    assert parent_gone()
