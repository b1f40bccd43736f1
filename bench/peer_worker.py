"""The durable peer's job (issue 26): send one message through Apprise, raise when it was not sent.

The stock `rq worker` runs it, named also as the worker's settings module so that its main process
imports it (PYTHONPATH at the repository root):

    rq worker -u REDIS_URL --with-scheduler -c bench.peer_worker

RQ's Retry, given at enqueue time by peer_app.py, retries a job that raised.
"""

from __future__ import annotations

import apprise

# The stock worker forks a work horse per job and the horse imports the job's module: without this,
# every job would import Apprise and load its plugins again (about 0.2 s here, 4 deliveries/s for two
# workers). A settings module (`-c`) is imported by the worker's main process before it forks, so
# loading the plugins here (one instantiation loads them all) pays for them once: RQ's own advice
# (import what jobs need before the fork), with the stock command.
apprise.Apprise.instantiate("json://localhost")


class NotSent(RuntimeError):
    """Apprise reported a failure; the URL is not in the message (it may hold a secret)."""


def send_message(url: str, title: str, body: str) -> None:
    client = apprise.Apprise()  # fresh per send: Apprise throttles repeated sends on one object
    client.add(url)
    if not client.notify(body=body or " ", title=title):
        raise NotSent("apprise could not send the message")
