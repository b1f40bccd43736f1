"""Order within a conversation across real worker processes and a SIGKILL: ten notifications of one key,
posted at once, reach the person's inbox in the order relay received them, each a reply to the first, though
the worker sending one of them is killed (its lease is swept back, and the others wait their turn meanwhile)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from redis import Redis
from starlette.testclient import TestClient

from relay.runtime.app import create_app
from relay.runtime.bootstrap import build
from relay.runtime.embedded import EmbeddedRedis
from relay.storage.leases import LEASES
from tests.conftest import base_config, post, worker_config_file
from tests.delivery.test_threads_email import ALICE, requesters
from tests.runtime.test_recovery import DEAD_AFTER, TARGET, _start, _states, _stop
from tests.servers import HttpSink, SmtpSink, wait_for


@pytest.mark.slow
def test_ten_of_one_key_arrive_in_the_order_received_through_a_sigkill_of_a_worker(
    redis: Redis, redis_server: EmbeddedRedis, sink: HttpSink, smtp: SmtpSink, tmp_path: Path
) -> None:
    settings = {
        "channels": {"mail": {"url": smtp.url(), "per_recipient": True, "outage": "off"}},
        "routes": [{"channels": ["mail"], "thread": "{{ body.thing }}"}],
        "default": {"channels": []},
        "retry": {"attempts": 6, "backoff": ["2s"]},
        "worker_threads": 4,
        "dead_worker_after": f"{DEAD_AFTER:g}s",
    }
    rt = build(base_config(sink, smtp, tmp_path, redis_server.url, **settings), redis)
    path = worker_config_file(tmp_path, redis_server.url, **settings)
    smtp.delay = 0.3
    payloads = [requesters("A", ALICE) for _ in range(10)]
    with TestClient(create_app(rt)) as client:
        for payload in payloads:  # each received a moment after the one before
            assert post(client, payload).status_code == 202
    events = [p["metadata"]["eventId"] for p in payloads]
    procs = [_start(path), _start(path)]
    try:
        sending = wait_for(
            lambda: len(smtp.mails) >= 3 and [o for u, o in redis.hgetall(LEASES).items() if u.startswith(b"d:")],
            timeout=30,
        )
        pid = int(sending[0].decode().split("-")[-2])
        victim = next(p for p in procs if p.pid == pid)
        os.kill(pid, signal.SIGKILL)
        victim.wait(10)
        wait_for(lambda: _states(rt, events) == ["delivered"] * 10, timeout=TARGET, interval=0.5)
    finally:
        _stop(procs)
    ids = [f"<{rt.store.event_delivery_ids(e)[0]}@example.com>" for e in events]
    arrived = list(dict.fromkeys(m.message["Message-ID"] for m in smtp.mails))  # a send in flight may come twice
    print(f"killed while sending {sending[0]!r}; {len(smtp.mails)} mails for 10 deliveries")
    assert arrived == ids
    assert all(m.message["In-Reply-To"] == ids[0] for m in smtp.mails if m.message["Message-ID"] != ids[0])
    assert redis.hlen(LEASES) == 0
