"""`relay test CHANNEL [--to ADDRESS]`: one short message through one channel, now, outside the queue, through the
very send of a delivery (`relay.delivery.channels.send`); its outcome printed as a delivery would record it."""

from __future__ import annotations

import argparse
import html
import sys
from datetime import UTC, datetime

from relay.cli.common import Command, config, log
from relay.config.messages import did_you_mean
from relay.core.outcome import Delivered, Outcome, Permanent, Transient

TITLE = "relay test message"


def message(channel: str, fmt: str, at: datetime) -> tuple[str, str]:
    """The test message's body in the channel's format, and its plain-text form (an e-mail's text part)."""
    when = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    text = f"A test message from relay through channel {channel}, sent {when} by `relay test`. Nothing to do."
    if fmt == "html":
        body = (
            f"<p>A test message from relay through channel <b>{html.escape(channel)}</b>, sent {when} "
            "by <code>relay test</code>. Nothing to do.</p>"
        )
        return body, text.replace("`", "")
    if fmt == "md":
        return text.replace(f"channel {channel}", f"channel *{channel}*"), text
    return text.replace("`", ""), text.replace("`", "")


def outcome_line(outcome: Outcome) -> str:
    """The outcome as a delivery records it: its state, and for a failure the service's reason."""
    if isinstance(outcome, Delivered):
        return "delivered"
    status = f" (status {outcome.status})" if outcome.status else ""  # HTTP, or SMTP for e-mail
    if isinstance(outcome, Transient):
        return f"not delivered: transient{status}, a delivery would be retried: {outcome.reason}"
    assert isinstance(outcome, Permanent)
    return f"not delivered: permanent{status}, a delivery would fail without retrying: {outcome.reason}"


def cmd_test(args: argparse.Namespace) -> int:
    from relay.cli.checks import shown_target
    from relay.delivery.channels import AddressError, address_url, channel_format, send

    cfg = config(args)
    redactor = log(cfg)  # every line printed below is scrubbed of the config's secrets, as logs are
    channel = cfg.channels.get(args.channel)
    if channel is None:
        defined = ", ".join(sorted(cfg.channels)) or "(none)"
        near = did_you_mean(args.channel, cfg.channels)
        hint = f" (did you mean {near!r}?)" if near else ""
        print(f"relay test: no channel {args.channel!r} in the config{hint}; defined: {defined}", file=sys.stderr)
        return 2
    if channel.per_recipient and not args.to:
        print(
            f"relay test: channel {args.channel!r} sends to each recipient's own address (per_recipient): "
            "give one with --to ADDRESS",
            file=sys.stderr,
        )
        return 2
    url = channel.url
    if args.to:
        try:
            url = address_url(channel.url, args.to)
        except AddressError as exc:
            print(f"relay test: --to {args.to!r}: {exc}", file=sys.stderr)
            return 2
        if url == channel.url:
            print(
                f"relay test: warning: channel {args.channel!r} has no recipient in its URL; --to is ignored",
                file=sys.stderr,
            )
    fmt = channel_format(channel.url, channel.format)
    body, text = message(args.channel, fmt, datetime.fromtimestamp(args.clock(), UTC))
    # Shown as `relay check` shows it: the URL the send really uses, its secrets scrubbed.
    print(f"sending a test message through {args.channel}: {shown_target(url, fmt)}")
    outcome = send(url, TITLE, body, fmt, text if fmt == "html" else None)
    print(redactor.scrub(outcome_line(outcome)))
    return 0 if isinstance(outcome, Delivered) else 1


def add_commands(command: Command) -> None:
    c = command("test", "send one short test message through one channel now, outside the queue")
    c.add_argument("channel", help="a channel's name in the config")
    c.add_argument("--to", help="the address to send to (required for a per_recipient channel)")
    c.set_defaults(func=cmd_test)
