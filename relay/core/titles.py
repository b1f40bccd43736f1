"""A title as each kind of channel takes it (docs/templates.md, "Title"): cut, in linear time, to what the
service accepts, ending with an ellipsis. An e-mail's Subject is one unfolded line that SMTP refuses over 998
octets (and Python's header code is quadratic in its words): cut to 250 characters and to what fits encoded
(UTF-8 encoded words counted at 3 octets a byte). Slack's header: 150 characters as escaped; Teams: 250.
"""

from __future__ import annotations

from collections.abc import Callable

from relay.core.redaction import EMAIL_SCHEMES

ELLIPSIS = "…"
EMAIL_ELLIPSIS = "..."  # keeps an ASCII subject ASCII (an encoded one looks like spam to some filters)
EMAIL_CHARS = 250
SUBJECT_OCTETS = 900  # of the 998 a line may have, less "Subject: " and an encoded word's wrapping, with room
SLACK_CHARS = 150
TEAMS_CHARS = 250

_SLACK_ESCAPED = {"&": 5, "<": 4, ">": 4}


def fit_title(title: str, scheme: str) -> str:
    """`title` as a channel of this scheme takes it: unchanged when it fits, else cut (at a space near the end)."""
    if scheme in EMAIL_SCHEMES:
        if title.isascii():
            return _cut(title, EMAIL_CHARS, _one, EMAIL_CHARS, EMAIL_ELLIPSIS)
        return _cut(title, EMAIL_CHARS, _encoded, SUBJECT_OCTETS - 12, EMAIL_ELLIPSIS)
    if scheme == "slack":
        return _cut(title, SLACK_CHARS, _slack, SLACK_CHARS, ELLIPSIS)
    if scheme in ("workflows", "workflow", "msteams"):
        return _cut(title, TEAMS_CHARS, _one, TEAMS_CHARS, ELLIPSIS)
    return title  # Apprise's own limit


def _one(ch: str) -> int:
    return 1


def _encoded(ch: str) -> int:
    return 3 * len(ch.encode("utf-8", "surrogatepass"))


def _slack(ch: str) -> int:
    return _SLACK_ESCAPED.get(ch, 1)


def _cut(title: str, max_chars: int, cost: Callable[[str], int], max_cost: int, ellipsis: str) -> str:
    """The longest start of `title` within both limits (room left for the ellipsis), in one pass."""
    room_chars = max_chars - len(ellipsis)
    room_cost = max_cost - sum(cost(c) for c in ellipsis)
    spent = 0
    end = 0  # the start that fits with the ellipsis
    for i, ch in enumerate(title):
        if i >= max_chars:
            break
        spent += cost(ch)
        if spent > max_cost:
            break
        if i < room_chars and spent <= room_cost:
            end = i + 1
    else:
        return title  # all of it fits
    kept = title[:end]
    space = kept.rfind(" ")
    if space >= end * 4 // 5:  # end at a word when that loses little
        kept = kept[:space]
    return kept.rstrip() + ellipsis
