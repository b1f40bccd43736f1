"""`relay delivery ID`: one delivery whole, as `GET /api/v1/deliveries/{id}` and its page show it: its record,
every try in its attempt log, and the message its last try sent."""

from __future__ import annotations

import argparse
import json
import sys

from relay.cli.common import Command, runtime, table
from relay.runtime.logs import escape

FACTS = ("id", "eventId", "kind", "channel", "route", "recipientType", "recipient", "address", "state", "attempts")
TRIES = ["at", "outcome", "status", "said", "error", "seconds", "probe"]


def cmd_delivery(args: argparse.Namespace) -> int:
    from relay.admin.detail import read_detail

    rt = runtime(args)
    found = read_detail(rt.store, args.delivery_id)
    if found is None:
        print(f"relay: no delivery with id {args.delivery_id!r} (unknown, or its record has expired)", file=sys.stderr)
        return 1
    _, shown = found
    if args.format == "json":
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    facts = [*FACTS, "lastError", "notBefore", "createdAt", "updatedAt", "digest", "traceId"]
    for key in (k for k in facts if shown.get(k) not in (None, "", [])):
        print(escape(f"{key + ':':<15}{shown[key]}"))
    print(f"\ntries (the last {len(shown['attemptLog'])} of {shown['attempts']}):")
    print(table(shown["attemptLog"], TRIES, args.wide))
    message = shown.get("message")
    print("\nmessage sent:" if message else "\nmessage sent: none yet (never tried)")
    if message:
        print(escape(f"  title: {message['title']}"))
        for line in message["text"].splitlines() or [""]:
            print(escape(f"  {line}"))
    return 0


def add_commands(command: Command) -> None:
    c = command("delivery", "one delivery whole: its record, every try and the message it sent (as its page shows)")
    c.add_argument("delivery_id", help="the delivery's id (`relay status` and `relay deliveries` list them)")
    c.add_argument("--format", choices=["table", "json"], default="table", help="json: as the admin API answers")
    c.add_argument("--json", action="store_const", const="json", dest="format", help="the same as --format json")
    c.add_argument("--wide", action="store_true", help="cells whole, never cut with an ellipsis")
    c.set_defaults(func=cmd_delivery)
