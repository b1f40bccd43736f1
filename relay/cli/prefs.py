"""`relay prefs show|set|on|link|export|import`: people's preferences in relay's Redis, for a support desk and
for backup (relay.preferences.model, relay.preferences.store)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from relay.cli.common import Command, command_group, config, read_payload, runtime

EXPORT_VERSION = 1


def _store(args: argparse.Namespace) -> Any:
    from relay.preferences.store import Preferences

    rt = runtime(args)
    return rt.config, Preferences(rt.redis)


def cmd_show(args: argparse.Namespace) -> int:
    from relay.core.model import iso
    from relay.preferences.model import Preference, check_person, is_address

    args.person = check_person(args.person)
    cfg, store = _store(args)
    pref = store.get(args.person) or Preference(args.person)
    _warn(pref, args.clock(), cfg.retention)
    refs = store.bound_to(pref.person) if is_address(pref.person) else []
    shown = pref.public(iso)
    if args.format == "json":
        print(json.dumps({**shown, "governedBy": refs}, indent=2, ensure_ascii=False))
        return 0
    print(f"person {pref.person}  updated {shown['updatedAt'] or 'never'}")
    if pref.optOuts:
        for o in pref.optOuts:
            print(f"  off: {o.describe()}")
    else:
        print("  no opt-outs: receives every kind routed to them")
    if pref.activeHours is None:
        print("  active hours: any time")
    else:
        print("  active hours: " + json.dumps(pref.activeHours, ensure_ascii=False))
    for ref in refs:
        print(f"  also governed by {ref}'s choices (this is its own address): relay prefs show {ref}")
    return 0


def _warn(pref: Any, now: float, retention: float) -> None:
    warning = pref.past_retention(now, retention)
    if warning:
        print(f"relay prefs: {pref.person}: {warning}", file=sys.stderr)


def cmd_switch(args: argparse.Namespace) -> int:
    """`set --off KIND` (args.off True) and `on KIND`: one kind switched off, or on again."""
    from relay.preferences.model import PreferenceError, check_person, validate

    args.person = check_person(args.person)
    cfg, store = _store(args)
    channel = args.channel
    try:  # the opt-out as the API would take it: a known channel (or *), a kind of printable characters
        validate(args.person, {"optOuts": [{"kind": args.kind, "channel": channel}]}, cfg.channels)
    except PreferenceError as exc:
        print(f"relay prefs: {exc.message}", file=sys.stderr)
        return 2

    def change(pref: Any) -> bool:
        return bool(pref.with_opt_out(args.kind, channel) if args.off else pref.without_opt_out(args.kind, channel))

    pref = store.update(args.person, change, args.clock())
    where = "every channel" if channel == "*" else channel
    print(f"{args.person}: {args.kind} on {where} is {'off' if args.off else 'on'}")
    still = pref.opted_out(args.kind, channel) if not args.off and channel != "*" else None
    if still is not None:
        print(f"  note: still off through the opt-out {still.describe()}", file=sys.stderr)
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    from relay.preferences.model import check_person
    from relay.web.links import preferences_url

    args.person = check_person(args.person)
    url = preferences_url(config(args).preferences, args.person, args.clock())
    if url is None:
        print("relay prefs: no link without preferences.public_url (and preferences.secret)", file=sys.stderr)
        return 2
    print(url)
    return 0


def cmd_unbind(args: argparse.Namespace) -> int:
    _, store = _store(args)
    if store.unbind(args.person):
        print(f"{args.person}: unbound; the next address their links go to is theirs")
    else:
        print(f"{args.person}: no address was bound")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    _, store = _store(args)
    everyone = [p.stored() for p in store.export()]
    json.dump({"version": EXPORT_VERSION, "preferences": everyone}, sys.stdout, indent=2, ensure_ascii=False)
    print()
    print(f"exported the preferences of {_people(len(everyone))}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from relay.preferences.model import from_stored

    _, data = read_payload(args.file)
    items = data.get("preferences") if isinstance(data, dict) else None
    if not isinstance(items, list):
        print('relay prefs import: not an export (expected {"version": 1, "preferences": [...]})', file=sys.stderr)
        return 2
    read = []
    for i, item in enumerate(items):
        try:
            read.append(from_stored(item if isinstance(item, dict) else {}))
        except ValueError as exc:
            print(f"relay prefs import: preferences[{i}]: {exc}; nothing was imported", file=sys.stderr)
            return 2
    cfg, store = _store(args)
    count = store.import_many(read)
    print(f"imported the preferences of {_people(count)}")
    for pref in read:
        _warn(pref, args.clock(), cfg.retention)
    return 0


def add_commands(command: Command) -> None:
    leaf = command_group(
        command, "prefs", "people's preferences: show, switch kinds off and on, link to their page, export, import"
    )

    c = leaf("show", "one person's preferences (a userRef, or an e-mail address)")
    c.add_argument("person")
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.set_defaults(func=cmd_show)
    c = leaf("set", "switch a kind off for one person (a glob: notification:output-port-*)")
    c.add_argument("person")
    c.add_argument("--off", dest="kind", required=True, metavar="KIND")
    c.add_argument("--channel", default="*", help="on this channel only (default: every channel)")
    c.set_defaults(func=cmd_switch, off=True)
    c = leaf("on", "switch a kind on again for one person")
    c.add_argument("person")
    c.add_argument("kind")
    c.add_argument("--channel", default="*", help="on this channel only (default: every opt-out of the kind)")
    c.set_defaults(func=cmd_switch, off=False)
    c = leaf("link", "print a signed link to one person's preference page")
    c.add_argument("person")
    c.set_defaults(func=cmd_link)
    c = leaf("unbind", "forget the address a userRef's links are bound to (without a catalog: its e-mail changed)")
    c.add_argument("person")
    c.set_defaults(func=cmd_unbind)
    c = leaf("export", "print everyone's preferences as JSON (relay prefs export > prefs.json)")
    c.set_defaults(func=cmd_export)
    c = leaf("import", "store the preferences of an export (a file, or - for standard input)")
    c.add_argument("file")
    c.set_defaults(func=cmd_import)


def _people(count: int) -> str:
    return "1 person" if count == 1 else f"{count} people"
