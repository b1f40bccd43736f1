"""`relay serve`, `relay api`, `relay worker`: running relay, whole or in halves."""

from __future__ import annotations

import argparse
import sys

from relay.cli.common import Command, config, config_file, log, no_config_file_warning, refuse_open_bind


def cmd_serve(args: argparse.Namespace) -> int:
    from relay.runtime.embedded import EmbeddedRedisError
    from relay.runtime.restarts import GIVE_UP_EXIT_CODE
    from relay.runtime.supervisor import serve

    cfg = config(args)
    if args.host:
        cfg.server.host = args.host
    if args.port is not None:
        cfg.server.port = args.port
    log(cfg)
    refuse_open_bind(cfg)
    file = config_file(args)
    if file is None:
        print(f"relay: warning: {no_config_file_warning()}", file=sys.stderr)
    try:
        return serve(cfg, file, args.workers if args.workers is not None else cfg.workers)
    except EmbeddedRedisError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return GIVE_UP_EXIT_CODE


def cmd_api(args: argparse.Namespace) -> int:
    from relay import tracing
    from relay.runtime.app import create_app
    from relay.runtime.bootstrap import build, reload_on_sighup
    from relay.runtime.http_server import bind, serve_http
    from relay.runtime.logs import follow

    cfg = config(args)
    redactor = log(cfg)
    refuse_open_bind(cfg)
    sockets = bind(cfg.server)
    rt = build(cfg, config_file=config_file(args), redactor=redactor)
    rt.tracer = tracing.start(cfg, "api", rt.name, redactor=rt.redactor)
    follow(rt.redactor, rt.tracer)
    reload_on_sighup(rt)
    serve_http(create_app(rt), cfg.server, sockets)
    rt.store.counts.retire(rt.redis)  # what it counted joins the fleet's totals
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from relay.runtime.worker import run_worker

    cfg = config(args)
    log(cfg)
    run_worker(
        cfg, burst=args.burst, config_file=config_file(args), counts_of=args.counts_of, metrics_port=args.metrics_port
    )
    return 0


def add_commands(command: Command) -> None:
    c = command("serve", "API, workers and (without redis.url) an embedded Redis, in one process group")
    c.add_argument("--workers", type=int, help="worker processes (default: config `workers`, 2)")
    c.add_argument("--host", help="the API's address (config server.host; default 127.0.0.1)")
    c.add_argument("--port", type=int, help="the API's port (config server.port; default 8080)")
    c.set_defaults(func=cmd_serve)
    command("api", "the HTTP API alone, against redis.url").set_defaults(func=cmd_api)
    c = command("worker", "one delivery worker, against redis.url")
    c.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    c.add_argument(
        "--metrics-port", type=int, help="serve this worker's /metrics on this port (config metrics.port; 0: none)"
    )
    # `relay serve` names itself to its workers: they count where it does, for its own /metrics.
    c.add_argument("--counts-of", help=argparse.SUPPRESS)
    c.set_defaults(func=cmd_worker)
