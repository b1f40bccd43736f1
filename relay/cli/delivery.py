"""`relay delivery ID`: one delivery whole, as `GET /api/v1/deliveries/{id}` and its page show it."""

from __future__ import annotations

import argparse
import json
import sys

from relay.cli.common import Command, output_options, runtime, table
from relay.runtime.logs import escape

FACTS = "id eventId kind channel route recipientType recipient address state attempts lastError notBefore createdAt"
TRIES = ["at", "outcome", "status", "said", "error", "seconds", "probe"]


def cmd_delivery(args: argparse.Namespace) -> int:
    from relay.admin.detail import read_detail

    found = read_detail(runtime(args).store, args.delivery_id)
    if found is None:
        print(f"relay: no delivery with id {args.delivery_id!r} (unknown, or its record has expired)", file=sys.stderr)
        return 1
    shown = found[1]
    if args.format == "json":
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return 0
    for key in (k for k in [*FACTS.split(), "updatedAt", "digest", "traceId"] if shown.get(k) not in (None, "")):
        print(escape(f"{key + ':':<15}{shown[key]}"))
    print(f"\ntries (the last {len(shown['attemptLog'])} of {shown['attempts']}):")
    print(table(shown["attemptLog"], TRIES, args.wide))
    message = shown.get("message") or {"title": "none yet (never tried)", "text": ""}
    print("\n" + escape(f"message sent: {message['title']}"))
    for line in message["text"].splitlines():
        print(escape(f"  {line}"))
    return 0


def add_commands(command: Command) -> None:
    c = command("delivery", "one delivery whole: its record, every try and the message it sent (as its page shows)")
    c.add_argument("delivery_id", help="the delivery's id (`relay status` and `relay deliveries` list them)")
    output_options(c)
    c.set_defaults(func=cmd_delivery)
