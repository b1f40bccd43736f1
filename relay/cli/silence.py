"""`relay silence add|list|expire`: silences in relay's Redis, as the API makes them (relay.admin.silences)."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from typing import Any

from relay.cli.common import Command, command_group, output_options, runtime, table
from relay.runtime.logs import escape

COLUMNS = ["id", "state", "action", "matchers", "startsAt", "endsAt", "createdBy", "comment"]


def cmd_add(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from relay.admin.silences import SilenceError, SilenceRequest, create, refusal
    from relay.silences.store import Silences

    body: dict[str, Any] = {
        "matchers": args.matchers,
        "createdBy": args.by,
        "comment": args.comment,
        "action": "skip" if args.skip else "hold",
    }
    body |= {"duration": args.for_} if args.for_ else {"endsAt": args.until}
    if args.start:
        body["startsAt"] = args.start
    rt = runtime(args)
    try:
        wanted = SilenceRequest.model_validate(body)
        silence, warned = create(Silences(rt.redis), wanted, rt.clock(), rt.store.retention)
    except (ValidationError, SilenceError) as exc:
        print(f"relay: silence not added: {refusal(exc)}", file=sys.stderr)
        return 2
    shown = silence.public(rt.clock())
    what = "skips" if silence.action == "skip" else "holds"
    print(
        escape(f"silence {silence.id} {shown['state']}: {what} {', '.join(silence.matchers)} until {shown['endsAt']}")
    )
    for warning in warned:
        print(f"relay: warning: {warning}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from relay.admin.silences import STATES, listed
    from relay.silences.store import Silences

    rt = runtime(args)
    states = STATES if args.all else ("active", "pending")
    found = listed(Silences(rt.redis), states, rt.clock())
    if args.format == "json":
        print(json.dumps(found, indent=2, ensure_ascii=False))
        return 0
    rows = [{**s, "matchers": ", ".join(s["matchers"])} for s in found]
    print(table(rows, COLUMNS, args.wide))
    return 0


def cmd_expire(args: argparse.Namespace) -> int:
    from relay.admin.silences import expire
    from relay.silences.store import Silences

    rt = runtime(args)
    done = expire(Silences(rt.redis), rt.work, args.id, rt.work.now_everywhere())  # ended now for the workers too
    if done is None:
        print(f"relay: no readable silence with id {args.id!r} (relay silence list --all)", file=sys.stderr)
        return 1
    silence, released = done
    print(
        f"silence {silence.id} expired; {released} held {'delivery goes' if released == 1 else 'deliveries go'} out now"
    )
    return 0


def add_commands(command: Command) -> None:
    leaf = command_group(command, "silence", "silence what matches for a while (held, or skipped): add, list, expire")

    c = leaf("add", "add a silence: every MATCHER must match (the routes' syntax, plus channel and recipientType)")
    c.add_argument("matchers", nargs="+", metavar="MATCHER", help='like kind=~"notification:quality-.*"')
    until = c.add_mutually_exclusive_group(required=True)
    until.add_argument("--for", dest="for_", metavar="DURATION", help="how long: 30m, 2h, 1d")
    until.add_argument("--until", metavar="TIME", help="when it ends: an ISO 8601 time (UTC unless it says)")
    c.add_argument("--start", metavar="TIME", help="when it begins (default: now)")
    c.add_argument("--comment", required=True, help="why: shown with every delivery it holds or skips")
    c.add_argument("--skip", action="store_true", help="skip what matches (default: hold it until the end)")
    c.add_argument("--by", default=_user(), help="who adds it (default: your user name)")
    c.set_defaults(func=cmd_add)
    c = leaf("list", "the active and pending silences (--all: the expired ones too)")
    c.add_argument("--all", action="store_true")
    output_options(c)
    c.set_defaults(func=cmd_list)
    c = leaf("expire", "end a silence now: what it held goes out")
    c.add_argument("id")
    c.set_defaults(func=cmd_expire)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "relay-cli"
