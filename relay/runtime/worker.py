"""`relay worker`: RQ SimpleWorker loops (no fork per job) in `worker_threads` threads of one process, RQ's
scheduler in a thread too (started by the first loop), plus a heartbeat for /readyz and a reaper of
abandoned jobs.

A send mostly waits on the network (a chat API answers in 100 ms or more), so one process sends up to
`worker_threads` deliveries at once. Each thread is a complete RQ worker with its own name and Redis
connection: RQ's registries, `rq info` and the abandoned-job handling see them as ordinary workers.
RQ installs its signal handlers only from the main thread, so the threads skip that; the main thread
handles SIGTERM and SIGINT instead: the first asks every thread to finish the delivery in hand and stop
(warm shutdown), a second one exits at once (the deliveries in hand are retried once RQ finds them
abandoned). Job timeouts are raised in the job's thread as RQ's timer-based death penalty does, by one
watchdog thread (`relay.runtime.watchdog`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, SimpleWorker
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry
from rq.scheduler import RQScheduler
from rq.utils import now as rq_now
from rq.worker import WorkerStatus

from relay.config import Config, ConfigError, load_config
from relay.runtime import lean_jobs
from relay.runtime.bootstrap import CONFIG_GENERATION, build, install, open_redis, redis_url, reload_runtime, runtime
from relay.runtime.watchdog import WatchdogDeathPenalty
from relay.storage.queue import QUEUE_NAME

log = logging.getLogger("relay.runtime.worker")
HEARTBEAT_SECONDS = 5.0
REAP_EVERY = 3  # heartbeats
# An idle thread waits for a job in slices this long, so that a stop request is seen within it.
IDLE_SLICE = 2
SCHEDULER_START_WAIT = 10.0
SCHEDULER_STOP_WAIT = 5.0  # its loop looks at a stop request every second
HEARTBEAT_MIN_GAP = 5.0  # seconds between an RQ worker's own heartbeats
SUSPENSION_CHECK_GAP = 1.0


class _Thread:
    """What RQ asks of its scheduler's process, answered by a thread: alive, and joined on stop."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.pid = os.getpid()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


class ThreadScheduler(RQScheduler):
    """RQ's scheduler (retries and rate-limit slots become due jobs) in a thread of the worker process.
    RQ forks a process for it: that would be one more Python process (some 50 MB) per machine, which
    must also not outlive its worker. It mostly sleeps; a thread does the same work."""

    def start(self) -> Any:
        self._status = self.Status.STARTED
        self._connection = None  # its own connection, made on first use
        thread = threading.Thread(target=self._run, name="relay-scheduler", daemon=True)
        self._process = _Thread(thread)  # type: ignore[assignment]
        thread.start()
        return self._process

    def _run(self) -> None:
        try:
            self.work()  # type: ignore[no-untyped-call]
        except Exception:
            log.exception("the scheduler stopped on an error; the worker starts it again")

    def _install_signal_handlers(self) -> None:
        """The process's main thread handles the signals (see `run_worker`)."""


class ThreadWorker(SimpleWorker):
    """An RQ SimpleWorker that can run in any thread of the process."""

    death_penalty_class = WatchdogDeathPenalty

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler_started = threading.Event()
        self._suspension_checked = -SUSPENSION_CHECK_GAP
        self._lean: str | None = None
        self._lean_scripts = lean_jobs.Scripts(self.connection)

    def _install_signal_handlers(self) -> None:
        """The process's main thread handles the signals (see `run_worker`)."""

    def _start_scheduler(
        self,
        burst: bool = False,
        logging_level: str | None = "INFO",
        date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
        log_format: str = DEFAULT_LOGGING_FORMAT,
    ) -> None:
        """RQ's own `_start_scheduler`, with the scheduler in a thread of this process."""
        try:
            self.scheduler = scheduler = ThreadScheduler(
                self.queues,
                connection=self.connection,
                logging_level=logging_level if logging_level is not None else self.log.level,
                date_format=date_format,
                log_format=log_format,
                serializer=self.serializer,
            )
            scheduler.acquire_locks()  # type: ignore[no-untyped-call]
            if scheduler.acquired_locks:
                if burst:
                    try:
                        scheduler.register_birth()
                        scheduler.enqueue_scheduled_jobs()  # type: ignore[no-untyped-call]
                    finally:
                        scheduler.release_locks()  # type: ignore[no-untyped-call]
                        scheduler.register_death()
                else:
                    scheduler.start()
        finally:
            self.scheduler_started.set()

    # RQ writes the worker's heartbeat (three commands) three times per job, its state twice and looks
    # for `rq suspend` once: a third of a short job's round trips. Heartbeats within a few seconds of
    # the last add nothing (the worker key lives `worker_ttl` + 60 s), an unchanged state need not be
    # written again, and a suspension is seen within a second.
    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        last = self.last_heartbeat
        recent = last is not None and (rq_now() - last).total_seconds() < HEARTBEAT_MIN_GAP
        if pipeline is None and timeout is None and recent:
            return
        super().heartbeat(timeout, pipeline)

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == getattr(self, "_state", None):
            return
        super().set_state(state, pipeline)

    def check_for_suspension(self, burst: bool) -> None:
        checked = time.monotonic()
        if checked - self._suspension_checked < SUSPENSION_CHECK_GAP:
            return
        self._suspension_checked = checked
        super().check_for_suspension(burst)

    # relay's own jobs start and end in one round trip each (`relay.runtime.lean_jobs`); any other job, and every
    # failure, takes RQ's own path. `_lean` names the job in hand when it takes the short one.
    def execute_job(self, job: Job, queue: Queue) -> None:
        if not lean_jobs.plain(job, self.default_result_ttl):
            super().execute_job(job, queue)
            return
        execution = self._lean_scripts.start(self, job, queue, self.get_heartbeat_ttl(job))
        self._lean = job.id
        try:
            self.perform_job(job, queue, execution)
        finally:
            self._lean = None
        self.set_state(WorkerStatus.IDLE)

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        if self._lean != job.id:  # else done by the start script
            super().prepare_job_execution(job, remove_from_intermediate_queue)

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        # RQ beats once more so that a callback may run; a plain job that succeeded has none to run.
        if self._lean == job.id and job.get_status(refresh=False) != JobStatus.FAILED:
            job.ended_at = rq_now()
            return
        super().handle_execution_ended(job, queue, heartbeat_ttl)

    def handle_job_success(
        self, job: Job, queue: Queue, started_job_registry: StartedJobRegistry, execution: Execution
    ) -> None:
        if self._lean == job.id:
            self._lean_scripts.finish(self, job, started_job_registry, execution)
        else:
            super().handle_job_success(job, queue, started_job_registry, execution)

    def stop_scheduler(self) -> None:
        """RQ signals its scheduler's process to stop; the thread is asked, and waited for."""
        scheduler = self.scheduler
        if scheduler is None:
            return
        scheduler.request_stop()  # type: ignore[no-untyped-call]
        running = scheduler._process
        if isinstance(running, _Thread):
            running.join(SCHEDULER_STOP_WAIT)

    def request_warm_stop(self) -> None:
        """Finish the job in hand (if any), then leave the work loop."""
        self._stop_requested = True

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        if timeout is None:  # burst: RQ does not block at all
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        # RQ blocks up to its dequeue timeout and then waits again, never looking at a stop request:
        # wait in short slices instead, so that an idle thread stops within IDLE_SLICE seconds.
        while not self._stop_requested:
            found = super().dequeue_job_and_maintain_ttl(IDLE_SLICE, IDLE_SLICE)
            if found is not None:
                return found
        return None


def _heartbeat(
    config: Config, name: str, stop: threading.Event, reload: threading.Event, generation: bytes | None
) -> None:
    conn = open_redis(redis_url(config), socket_timeout=5, socket_connect_timeout=5)
    from relay.storage.store import Store

    store = Store(conn, config.retention)
    started = StartedJobRegistry(QUEUE_NAME, connection=conn)
    beats = 0
    while not stop.is_set():
        try:
            store.heartbeat(name)
            now_generation = _generation(conn)
            if reload.is_set() or now_generation != generation:
                # SIGHUP here, or a reload elsewhere (`relay serve`, POST /api/v1/reload): read our file again.
                reload.clear()
                generation = now_generation
                _reload(name)
            if beats % REAP_EVERY == 0:
                # RQ itself looks for jobs of dead workers only every 10 minutes: look more often, so a
                # delivery whose worker was killed is retried within about two minutes.
                started.cleanup()
        except RedisError as exc:
            log.warning("heartbeat failed: %s", type(exc).__name__)
        beats += 1
        parent_gone = os.getppid() == 1
        if parent_gone and os.environ.get("RELAY_SUPERVISED") == "1":
            # `relay serve` died without stopping us: do not linger as an orphan.
            os._exit(0)
        stop.wait(HEARTBEAT_SECONDS)


def _generation(conn: Redis) -> bytes | None:
    value = conn.get(CONFIG_GENERATION)
    return value if isinstance(value, bytes) else None


def _reload(name: str) -> None:
    try:
        for note in reload_runtime(runtime()):
            log.warning("%s", note)
        log.info("worker %s reloaded its config", name)
    except ConfigError as exc:
        log.error("worker %s kept its running config; the new one is invalid: %s", name, exc)
    except Exception:  # the heartbeat thread must live on whatever a reload meets
        log.exception("worker %s kept its running config; the reload failed", name)


def _warm_up(config: Config) -> None:
    """Load Apprise's plugins for every channel once, before threads would race to load them."""
    from relay.delivery.channels import check_url

    for channel in config.channels.values():
        with contextlib.suppress(Exception):
            check_url(channel.url)


class ThreadPool:
    """`count` ThreadWorkers; a thread whose worker quit on its own (a Redis outage) is started again."""

    def __init__(self, config: Config, name: str, count: int, burst: bool) -> None:
        self.url = redis_url(config)
        self.name = name
        self.count = count
        self.burst = burst
        self.level = logging.getLevelName(log.getEffectiveLevel())
        self.stopping = threading.Event()
        self.workers: list[ThreadWorker] = []
        self.threads: list[threading.Thread] = []
        # Re-entrant: the signal handler (main thread) may stop the pool while wait() holds it.
        self.lock = threading.RLock()
        self._serial = 0

    def _new_worker(self) -> ThreadWorker:
        # RQ blocks on BLPOP: its connection must not have a short socket timeout.
        conn = open_redis(self.url, socket_connect_timeout=5, health_check_interval=30)
        self._serial += 1
        return ThreadWorker(
            [Queue(QUEUE_NAME, connection=conn)], connection=conn, name=f"{self.name}-{self._serial}", worker_ttl=60
        )

    def _run(self, worker: ThreadWorker, with_scheduler: bool) -> None:
        try:
            worker.work(with_scheduler=with_scheduler, burst=self.burst, logging_level=self.level)
        except Exception:
            log.exception("worker thread %s stopped on an error", worker.name)
        finally:
            worker.scheduler_started.set()

    def _start(self, slot: int | None, with_scheduler: bool) -> ThreadWorker:
        worker = self._new_worker()
        thread = threading.Thread(target=self._run, args=(worker, with_scheduler), name=worker.name, daemon=True)
        if slot is None:
            self.workers.append(worker)
            self.threads.append(thread)
        else:
            self.workers[slot], self.threads[slot] = worker, thread
        thread.start()
        return worker

    def start(self) -> None:
        with self.lock:
            first = self._start(None, with_scheduler=True)
        # The first thread takes the scheduler lock (or finds another machine's) before the rest start.
        first.scheduler_started.wait(SCHEDULER_START_WAIT)
        with self.lock:
            for _ in range(self.count - 1):
                if not self.stopping.is_set():
                    self._start(None, with_scheduler=False)

    def wait(self) -> None:
        """Until every thread is done (burst, or after a stop); restarts threads that quit on their own."""
        while True:
            with self.lock:
                alive = [t for t in self.threads if t.is_alive()]
                if not alive and (self.burst or self.stopping.is_set()):
                    return
                if not self.burst and not self.stopping.is_set():
                    for slot, thread in enumerate(self.threads):
                        if not thread.is_alive():
                            log.warning("worker thread %s quit; starting another", thread.name)
                            self._start(slot, with_scheduler=slot == 0)
            for thread in alive:
                thread.join(0.5)
                break
            else:
                self.stopping.wait(0.5)

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            for worker in self.workers:
                worker.request_warm_stop()


def _fresh_config(config: Config, config_file: Path | None) -> tuple[Config, bytes | None]:
    """The config generation, then the file read again: a reload announced after that generation is
    seen by the heartbeat, and one announced before it is already in the file read here."""
    try:
        generation = _generation(open_redis(redis_url(config), socket_timeout=5, socket_connect_timeout=5))
    except RedisError:
        return config, None
    return (load_config(config_file) if config_file is not None else config), generation


def run_worker(config: Config, burst: bool = False, config_file: Path | None = None) -> None:
    config, generation = _fresh_config(config, config_file)
    install(build(config, config_file=config_file))
    _warm_up(config)
    name = f"relay-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    reload = threading.Event()
    signal.signal(signal.SIGHUP, lambda *_: reload.set())
    beat = threading.Thread(target=_heartbeat, args=(config, name, stop, reload, generation), daemon=True)
    beat.start()
    pool = ThreadPool(config, name, config.worker_threads, burst)
    signals = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.info("worker %s stopping: finishing the deliveries in hand", name)
            pool.stop()
        else:
            log.warning("worker %s: second stop signal, exiting now", name)
            os._exit(1)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info("worker %s started with %d thread(s)", name, config.worker_threads)
    try:
        pool.start()
        pool.wait()
    finally:
        stop.set()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
