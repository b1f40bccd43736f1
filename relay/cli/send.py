"""`relay send` and `relay sink`: post a notification to a running relay, and catch what it sends."""

from __future__ import annotations

import argparse
import base64
import sys
import urllib.error
import urllib.request
from pathlib import Path

from relay.cli.common import Command, config, read_payload
from relay.config import Config, ConfigError
from relay.config.urls import masked_url


def cmd_send(args: argparse.Namespace) -> int:
    text, _ = read_payload(args.payload)
    try:
        cfg: Config | None = config(args)
    except ConfigError:
        if not args.url:
            raise
        cfg = None
    url = args.url
    if not url and cfg is not None:
        from relay.runtime.http_server import local_url

        url = local_url(cfg.server.host, cfg.server.port) + cfg.server.path
    token = args.token or (cfg.server.auth.tokens[0] if cfg and cfg.server.auth.tokens else None)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif cfg is not None and cfg.server.auth.basic is not None:
        basic = cfg.server.auth.basic
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
        shown = masked_url(url)  # masks a password in any URL, not only Redis's
        serve = f"relay serve --config {args.config}" if args.config else "relay serve"
        hint = f"relay does not seem to be running there; start it with `{serve}`, or give its address with --url"
        print(f"relay: cannot reach relay at {shown} ({exc.reason}): {hint}", file=sys.stderr)
        return 1


def cmd_sink(args: argparse.Namespace) -> int:
    from relay.runtime.devsink import run_sink

    run_sink(args.http_port, args.smtp_port, host=args.host, fail=args.fail, save=args.save)
    return 0


def add_commands(command: Command, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = command("send", "post a notification to a running relay")
    c.add_argument("payload", help="a notification's JSON file, or - to read it from standard input")
    c.add_argument("--url", help="the webhook's URL (default: this config's server.host, port and path)")
    c.add_argument("--token", help="the webhook's token (default: this config's first server.auth.tokens)")
    c.set_defaults(func=cmd_send)
    about = "print what the example channels send (webhooks and e-mail), for trying relay"
    c = sub.add_parser("sink", help=about, description=about)
    c.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    c.add_argument("--http-port", type=int, default=9999, help="the webhooks' port (default: %(default)s)")
    c.add_argument("--smtp-port", type=int, default=8025, help="the e-mail's SMTP port (default: %(default)s)")
    c.add_argument(
        "--fail",
        action="store_true",
        help="refuse everything (webhooks 500, e-mail 451) until restarted without it: to try failures and replay",
    )
    c.add_argument(
        "--save",
        type=Path,
        metavar="DIR",
        help="also keep each message as it came in DIR: an e-mail as .eml, a webhook's body as .json",
    )
    c.set_defaults(func=cmd_sink)
