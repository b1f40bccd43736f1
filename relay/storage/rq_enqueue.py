"""relay's planning job, written by relay's accept script exactly as RQ's `Queue.enqueue_call` writes it.

Why: a notification is accepted in one atomic round trip (dedup, event record, counters and the planning
job together), so that a 202 always means durable and nothing is ever half-accepted; and it is sent from
the asyncio event loop with no thread hop. RQ has no enqueue that joins a caller's script or runs on
asyncio. So the job is built by RQ (`Queue.create_job`), serialized by RQ (`Job.to_dict`), and only the
writing of its hash and the push onto the queue (both under RQ's own key names: `Job.key`, `Queue.key`,
`Queue.redis_queues_keys`) happen in relay's script. `Intake` checks at start that its job hash is the
one RQ would write, and else writes RQ's whole hash as RQ built it; `tests/intake/test_ingest.py` compares the
two and fails when a new RQ writes jobs differently. Listed in the README under "Upgrading dependencies".
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from rq import Queue, Retry
from rq.job import Job
from rq.serializers import DefaultSerializer
from rq.utils import get_call_string, now

# Job hash fields that differ between planning jobs; every other field RQ writes is the same for all.
_VARYING = ("created_at", "enqueued_at", "data", "description")


def lua_literal(value: Any) -> str:
    """A Lua string literal of `value`, every byte outside a small safe set written as a decimal escape."""
    raw = value if isinstance(value, bytes) else str(value).encode()
    safe = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:[] "
    return "'" + "".join(chr(c) if c in safe else f"\\{c:03d}" for c in raw) + "'"


def prepared_job(
    queue: Queue,
    func: str,
    args: tuple[Any, ...],
    ident: str,
    failure_ttl: int,
    timeout: int,
    retry: Retry,
    result_ttl: int,
) -> Job:
    """A job as `Queue.enqueue_call` builds it before saving it: origin, enqueue time, server version set."""
    job = queue.create_job(
        func, args=args, job_id=ident, result_ttl=result_ttl, failure_ttl=failure_ttl, timeout=timeout, retry=retry
    )
    job.origin = queue.name
    job.enqueued_at = now()
    job.redis_server_version = queue.get_redis_server_version()
    return job


def job_hash_args(job: Job) -> list[Any]:
    """The job hash's field/value pairs as `Job.save` writes them: `Job.to_dict`, with no empty field."""
    # The job has no ttl, so RQ's `job.cleanup(ttl=job.ttl)` after the save sets no expiry either.
    pairs: list[Any] = []
    for key, value in job.to_dict().items():
        if value is None:
            continue
        if isinstance(value, Enum):  # JobStatus is a str enum: its plain value
            value = value.value
        pairs += [key, value if isinstance(value, bytes | str) else str(value)]
    return pairs


def varying_values(func: str, event_id: str, stamp: str) -> list[Any]:
    """The planning job's own values: its times (created, enqueued), call data and description.

    The call data is RQ's serialized call, left uncompressed: RQ reads a job's data raw when it is not
    zlib data (`Job.restore`), and both sides are spared the compression.
    """
    data = DefaultSerializer.dumps((func, None, (event_id,), {}))
    return [stamp, data, get_call_string(func, (event_id,), {}, max_length=75)]


def zlib_or_raw(data: bytes) -> bytes:
    """Call data as RQ's `Job.restore` reads it."""
    try:
        return zlib.decompress(data)
    except zlib.error:
        return data


def rq_timestamp() -> str:
    """Now, as RQ's `utcformat(now())` writes it ('%Y-%m-%dT%H:%M:%S.%fZ'), without strftime's cost."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def job_fields(sample: Job, func: str) -> tuple[str, bool]:
    """The job hash's fields as a Lua argument list for the accept script, and whether it is the short form.

    Short form: every field that is the same for all planning jobs written into the script as literals,
    and the four that differ taken from ARGV 10-12 (`varying_values`). Used only when `sample` (a job RQ
    built) has exactly those varying fields with the values relay would write; else the script takes RQ's
    whole field list from ARGV 10 on, for each job.
    """
    built = job_hash_args(sample)
    pairs = dict(zip(built[::2], built[1::2], strict=True))
    event_id = str(sample.args[0])
    _, data, description = varying_values(func, event_id, "")
    same = set(pairs) >= set(_VARYING) and pairs["description"] == description
    same = same and zlib_or_raw(pairs["data"]) == data
    if not same:
        return "unpack(ARGV, 10)", False
    const = "".join(f"{lua_literal(k)}, {lua_literal(v)}, " for k, v in pairs.items() if k not in _VARYING)
    varying = "'created_at', ARGV[10], 'enqueued_at', ARGV[10], 'data', ARGV[11], 'description', ARGV[12]"
    return const + varying, True
