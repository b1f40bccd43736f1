"""The `relay` command: run the service, check config, preview, send, inspect and replay."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError

from relay.config import Config, ConfigError, default_config_path, load_config
from relay.runtime.logs import setup_logging

BATCH = 100


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def _config_file(args: argparse.Namespace) -> Path | None:
    return Path(args.config) if args.config else default_config_path()


def _log(config: Config) -> None:
    setup_logging(config.logging.level, config.logging.format, config.secrets())


def cmd_serve(args: argparse.Namespace) -> int:
    from relay.runtime.supervisor import serve

    config = _config(args)
    if args.host:
        config.server.host = args.host
    if args.port is not None:
        config.server.port = args.port
    _log(config)
    _refuse_open_bind(config)
    return serve(config, _config_file(args), args.workers if args.workers is not None else config.workers)


def _refuse_open_bind(config: Config) -> None:
    host = config.server.host
    loopback = host in {"127.0.0.1", "localhost", "::1"} or host.startswith("127.")
    if not loopback and not config.server.auth.enabled and not config.server.allow_unauthenticated:
        raise ConfigError(
            f"server.host is {host!r} but no webhook auth is configured: anyone could post notifications. "
            "Configure server.auth.tokens or server.auth.basic, or set server.allow_unauthenticated: true."
        )


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from relay.runtime.app import create_app
    from relay.runtime.bootstrap import build, reload_on_sighup

    config = _config(args)
    _log(config)
    _refuse_open_bind(config)
    rt = build(config, config_file=_config_file(args))
    reload_on_sighup(rt)
    app = create_app(rt)
    uvicorn.run(
        app,
        host=config.server.host,
        port=config.server.port,
        log_config=None,
        access_log=False,
        lifespan="off",
        # h11 takes a configurable bound on the request line plus headers (httptools has a fixed
        # one of its own); over it, uvicorn answers a plain-text 400 and closes the connection.
        http="h11",
        h11_max_incomplete_event_size=config.server.limits.max_header_bytes,
    )
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from relay.runtime.worker import run_worker

    config = _config(args)
    _log(config)
    run_worker(config, burst=args.burst, config_file=_config_file(args))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from relay.admin.checks import check_all

    config = _config(args)
    problems, notes = check_all(config)
    for line in notes:
        print(f"ok    {line}")
    for line in problems:
        print(f"error {line}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
        return 1
    print("config is valid")
    return 0


def _read_payload(path: str) -> tuple[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return text, json.loads(text)


def cmd_preview(args: argparse.Namespace) -> int:
    from relay.admin.preview import preview

    config = _config(args)
    _, data = _read_payload(args.payload)
    try:
        text = preview(config, data, args.format)
    except ValidationError as exc:
        print(f"the payload is not a valid notification:\n{exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def cmd_send(args: argparse.Namespace) -> int:
    text, _ = _read_payload(args.payload)
    try:
        config: Config | None = _config(args)
    except ConfigError:
        if not args.url:
            raise
        config = None
    url = args.url
    if not url and config is not None:
        host = config.server.host
        host = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host
        url = f"http://{host}:{config.server.port}{config.server.path}"
    token = args.token or (config.server.auth.tokens[0] if config and config.server.auth.tokens else None)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif config is not None and config.server.auth.basic is not None:
        import base64

        basic = config.server.auth.basic
        headers["Authorization"] = "Basic " + base64.b64encode(f"{basic.username}:{basic.password}".encode()).decode()
    request = urllib.request.Request(url, data=text.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            print(f"{response.status} {response.read().decode()}")
            return 0
    except urllib.error.HTTPError as exc:
        print(f"{exc.code} {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"cannot reach relay at {url}: {exc.reason}", file=sys.stderr)
        return 1


def cmd_sink(args: argparse.Namespace) -> int:
    from relay.runtime.devsink import run_sink

    run_sink(args.http_port, args.smtp_port)
    return 0


def _runtime(args: argparse.Namespace) -> Any:
    from relay.runtime.bootstrap import build

    return build(_config(args))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [min(60, max(len(c), *(len(row[i]) for row in cells))) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    for row in cells:
        lines.append("  ".join(v[:w].ljust(w) for v, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    rt = _runtime(args)
    event = rt.store.event(args.event_id)
    if event is None:
        print(f"no notification with eventId {args.event_id!r}", file=sys.stderr)
        return 1
    from relay.storage.store import iso

    records = [r.public() for r in rt.store.deliveries(rt.store.event_delivery_ids(args.event_id)) if r]
    if args.json:
        print(
            json.dumps(
                {
                    "eventId": event.eventId,
                    "kind": event.kind,
                    "receivedAt": iso(event.receivedAt),
                    "deliveries": records,
                },
                indent=2,
            )
        )
        return 0
    print(f"event {event.eventId}  kind {event.kind}  received {iso(event.receivedAt)}")
    print(
        _table(records, ["id", "recipientType", "recipient", "channel", "state", "attempts", "updatedAt", "lastError"])
    )
    return 0


def _filters(args: argparse.Namespace, state: str | None) -> Any:
    from relay.admin.selection import Filters, since_value

    return Filters(state, args.kind, args.channel, since_value(args.since), args.event)


def cmd_deliveries(args: argparse.Namespace) -> int:
    rt = _runtime(args)
    found = _filters(args, args.state).select(rt.store, args.limit)
    rows = [r.public(with_event=True) for r in found]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        _table(
            rows,
            [
                "id",
                "eventId",
                "kind",
                "recipientType",
                "recipient",
                "channel",
                "state",
                "attempts",
                "updatedAt",
                "lastError",
            ],
        )
    )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from relay.core.model import State

    rt = _runtime(args)
    filters = _filters(args, State.FAILED.value)
    chosen = [r for r in filters.candidates(rt.store) if filters.matches(r)]
    if args.dry_run:
        for r in chosen:
            print(f"would replay {r.id}  event {r.eventId}  channel {r.channel}  last error: {r.lastError}")
        print(f"{len(chosen)} failed deliveries would be replayed (dry run)")
        return 0
    done = 0
    for start in range(0, len(chosen), BATCH):
        done += rt.intake.replay(chosen[start : start + BATCH], rt.config.retry.attempts)
        _progress(done, len(chosen))
    if chosen:
        print(file=sys.stderr)
    print(f"replayed {done} failed deliveries")
    return 0


def _progress(done: int, total: int, width: int = 30) -> None:
    filled = int(width * done / total) if total else width
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="relay", description="Webhook notification relay.")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help_, description=help_)
        c.add_argument("--config", help="config file (default ./config.yaml, else $RELAY_CONFIG)")
        return c

    c = command("serve", "API, workers and (without redis.url) an embedded Redis, in one process group")
    c.add_argument("--workers", type=int, help="worker processes (default: config `workers`, 2)")
    c.add_argument("--host")
    c.add_argument("--port", type=int)
    c.set_defaults(func=cmd_serve)
    command("api", "the HTTP API alone, against redis.url").set_defaults(func=cmd_api)
    c = command("worker", "one delivery worker, against redis.url")
    c.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    c.set_defaults(func=cmd_worker)
    command("check", "validate config, compile templates, parse channel URLs").set_defaults(func=cmd_check)
    c = command("preview", "print the delivery plan and every rendered message; sends nothing")
    c.add_argument("payload", help="notification JSON file, or - for standard input")
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.set_defaults(func=cmd_preview)
    c = command("send", "post a notification to a running relay")
    c.add_argument("payload")
    c.add_argument("--url")
    c.add_argument("--token")
    c.set_defaults(func=cmd_send)
    for name, help_ in (("deliveries", "table of deliveries, newest first"), ("replay", "requeue failed deliveries")):
        c = command(name, help_)
        c.add_argument("--event")
        c.add_argument("--kind")
        c.add_argument("--channel")
        c.add_argument("--since", help="a duration back from now (2h) or an ISO time")
        if name == "deliveries":
            c.add_argument("--state", choices=["queued", "retrying", "delivered", "failed", "skipped"])
            c.add_argument("--limit", type=int, default=50)
            c.add_argument("--json", action="store_true")
            c.set_defaults(func=cmd_deliveries)
        else:
            c.add_argument("--dry-run", action="store_true")
            c.set_defaults(func=cmd_replay)
    c = sub.add_parser("sink", help="print what the example channels send (webhooks and e-mail), for trying relay")
    c.add_argument("--http-port", type=int, default=9999)
    c.add_argument("--smtp-port", type=int, default=8025)
    c.set_defaults(func=cmd_sink)
    c = command("status", "one notification's deliveries")
    c.add_argument("event_id")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_status)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    except RedisError as exc:
        print(f"relay: cannot reach Redis ({exc}); is `relay serve` running with this config?", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
