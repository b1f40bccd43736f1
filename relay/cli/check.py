"""`relay check` and `relay preview`: what the config would do, before anything is sent."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from relay.cli.common import Command, config, no_config_file_warning, read_payload
from relay.config import ConfigError, read_config


def cmd_check(args: argparse.Namespace) -> int:
    from relay.cli.checks import channel_url_problems, check_all

    warnings: list[str] = []
    try:
        found = read_config(args.config)
    except ConfigError as exc:  # a file that is not YAML (or not there): a problem like any other, exit 1
        return _report(args, [], warnings, [str(exc)])
    problems = list(found.problems)
    notes = [f"config file {found.file}" if found.file else "no config file"]
    if found.file is None:
        warnings.append(no_config_file_warning())
    if found.config is not None:
        more, config_warnings, config_notes = check_all(found.config)
        problems += more
        # Without a file the warning above already says that nothing would be sent.
        warnings += config_warnings if found.file is not None else []
        notes += config_notes
    else:
        # Validation failed, but channel URLs can still be parsed: report those problems in the same run.
        problems += channel_url_problems(found.data)
    return _report(args, notes, warnings, problems)


def _report(args: argparse.Namespace, notes: list[str], warnings: list[str], problems: list[str]) -> int:
    code = 1 if problems or (warnings and args.strict) else 0
    if args.format == "json":  # one document on stdout, whatever the verdict; the exit code as in text
        print(json.dumps({"valid": not problems, "problems": problems, "warnings": warnings, "notes": notes}))
        return code
    for i, line in enumerate(notes):
        mark = "read" if i == 0 and problems else "ok"  # no "ok" for a file that holds problems
        print(f"{mark:<6}{line}")
    for line in warnings:
        print(f"warn  {line}", file=sys.stderr)
    for line in problems:
        print(f"error {line}", file=sys.stderr)
    if problems:
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
    elif warnings:
        print(f"config is valid, with {len(warnings)} warning(s)" + (" (--strict: failing)" if args.strict else ""))
    else:
        print("config is valid")
    return code


def cmd_preview(args: argparse.Namespace) -> int:
    from relay.cli.preview import preview, preview_plan

    cfg = config(args)
    _, data = read_payload(args.payload)
    with _relay_state(cfg, data) as (preferences, silences, lookup, conversations):
        try:
            plan = preview_plan(cfg, data, _at(args.at), preferences, silences, lookup, conversations=conversations)
        except ValidationError as exc:
            print(f"the payload is not a valid notification:\n{exc}", file=sys.stderr)
            return 2
    print(preview(plan, args.format))
    return 0


@contextmanager
def _relay_state(cfg: Any, data: Any) -> Iterator[tuple[Any, Any, Any, Any]]:
    """People's preferences, silences, catalog names and conversations, as sending asks them; Redis unreachable:
    none of them (said once on stderr), and the preview goes on."""
    from redis.exceptions import RedisError

    from relay.cli.preview import people_of
    from relay.delivery.catalog import Catalog
    from relay.delivery.names import catalog_lookup
    from relay.preferences.store import Preferences
    from relay.runtime.bootstrap import open_redis, redis_url
    from relay.silences.store import Silences
    from relay.threads.store import Threads

    try:
        people = people_of(data)
    except ValidationError:
        people = []  # not a notification: the preview says so
    conn = open_redis(redis_url(cfg), socket_timeout=2, socket_connect_timeout=2)
    try:
        try:
            found = (Preferences(conn).get_many(people) if people else {}), Silences(conn).all()
        except (RedisError, OSError):
            print(
                "relay preview: people's preferences and silences not read (Redis unreachable): shown as if there"
                " were none",
                file=sys.stderr,
            )
            yield {}, [], None, None
            return
        yield (*found, catalog_lookup(Catalog(cfg.platform, conn) if cfg.platform.url else None), Threads(conn).get)
    finally:
        conn.close()


def _at(value: str | None) -> datetime | None:
    if not value:
        return None
    from relay.core.times import instant

    try:
        return datetime.fromtimestamp(instant(value), UTC)
    except ValueError as exc:
        raise SystemExit(f"relay preview: --at: {exc}") from None


def add_commands(command: Command) -> None:
    c = command("check", "validate config, compile templates, parse channel URLs; report every problem")
    c.add_argument("--strict", action="store_true", help="exit non-zero on warnings too (e.g. nothing would be sent)")
    c.add_argument("--format", choices=["text", "json"], default="text", help="json: one document on stdout")
    c.set_defaults(func=cmd_check)
    c = command("preview", "print the delivery plan and every rendered message; sends nothing")
    c.add_argument("payload", help="notification JSON file, or - for standard input")
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.add_argument("--at", help="as if the notification came at this ISO 8601 time (quiet hours); default now, UTC")
    c.set_defaults(func=cmd_preview)
