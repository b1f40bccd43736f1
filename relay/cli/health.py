"""`relay health`: the container image's HEALTHCHECK, right for the role the container runs (docs/container.md): the
API's GET /healthz on `server.port` as configured, or a worker's heartbeat file (`relay.runtime.beatfile`) judged as
every beat is (`relay.storage.leases.beat_alive`). Without `--api` or `--worker`, the role is read from PID 1's
command line (relay itself, in a container; elsewhere it is the API)."""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from pathlib import Path

from relay.cli.common import Command

ROLES = ("serve", "api", "worker")
TIMEOUT = 3.0


def relay_command(cmdline: bytes) -> tuple[str | None, argparse.Namespace]:
    """The relay role a process's command line runs, and its --config, --host and --port (or None)."""
    argv = [a.decode(errors="replace") for a in cmdline.split(b"\0") if a]
    options = argparse.ArgumentParser(add_help=False)
    for flag in ("--config", "--host", "--port"):
        options.add_argument(flag)
    for i, arg in enumerate(argv[1:], start=1):
        # `relay serve` (the console script, any path) or `python -m relay serve`
        if arg in ROLES and Path(argv[i - 1]).name == "relay":
            found, _ = options.parse_known_args(argv[i + 1 :])
            return arg, found
    return None, options.parse_known_args([])[0]


def check_worker(config_file: str | None) -> tuple[bool, str]:
    from relay.config import load_config
    from relay.core.clock import system_clock
    from relay.runtime import beatfile
    from relay.storage.leases import beat_alive

    after = load_config(config_file).dead_worker_after
    last, now = beatfile.last_beat(), system_clock()  # the file's time is the wall clock's
    if last is None:
        return False, f"no worker heartbeat here ({beatfile.beat_file()} is missing)"
    if not beat_alive(last, now, after):
        return False, f"the worker's last heartbeat is {now - last:.0f} s old (dead_worker_after: {after:g} s)"
    return True, f"the worker beat {max(0.0, now - last):.0f} s ago"


def check_api(config_file: str | None, host: str | None, port: str | None) -> tuple[bool, str]:
    from relay.config import load_config
    from relay.runtime.http_server import local_url

    server = load_config(config_file).server
    url = local_url(host or server.host, int(port) if port else server.port) + "/healthz"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        return False, f"{url}: {exc}"
    return status == 200, f"{url} answered {status}"


def cmd_health(args: argparse.Namespace) -> int:
    try:
        role, started_with = relay_command(Path("/proc/1/cmdline").read_bytes())
    except OSError:
        role, started_with = relay_command(b"")
    if args.role is not None:
        role = args.role
    if role == "worker":
        ok, text = check_worker(args.config or started_with.config)
    else:
        ok, text = check_api(args.config or started_with.config, started_with.host, started_with.port)
    print(f"{'healthy' if ok else 'unhealthy'}: {text}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def add_commands(command: Command) -> None:
    c = command("health", "exit 0 if this machine's relay is healthy: the API's /healthz, or a worker's heartbeat")
    role = c.add_mutually_exclusive_group()
    role.add_argument("--api", dest="role", action="store_const", const="api", help="check the API's /healthz")
    role.add_argument("--worker", dest="role", action="store_const", const="worker", help="check a worker's beat")
    c.set_defaults(func=cmd_health, role=None)
