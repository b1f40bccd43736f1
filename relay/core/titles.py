"""A title as each kind of channel takes it (docs/templates.md, "Title"): cut, in linear time, to what the
service accepts, ending with an ellipsis. An e-mail's Subject is one unfolded line that SMTP refuses over 998
octets (and Python's header code is quadratic in its words): cut to 250 characters and to what fits encoded
(UTF-8 encoded words counted at 3 octets a byte). Slack's header: 150 characters as escaped; Teams: 250.
"""

from __future__ import annotations

from collections.abc import Callable

ELLIPSIS = "…"
EMAIL_ELLIPSIS = "..."  # keeps an ASCII subject ASCII (an encoded one looks like spam to some filters)
EMAIL_CHARS = 250
SUBJECT_OCTETS = 900  # of the 998 a line may have, less "Subject: " and an encoded word's wrapping, with room
SLACK_CHARS = 150
TEAMS_CHARS = 250

_EMAIL = frozenset({"mailto", "mailtos"})
_SLACK = frozenset({"slack"})
_TEAMS = frozenset({"workflows", "workflow", "msteams"})
_SLACK_ESCAPED = {"&": 5, "<": 4, ">": 4}


def title_limit(scheme: str) -> int | None:
    """The most characters a title may have on a channel of this URL scheme; None: Apprise's own limit."""
    if scheme in _EMAIL:
        return EMAIL_CHARS
    if scheme in _SLACK:
        return SLACK_CHARS
    if scheme in _TEAMS:
        return TEAMS_CHARS
    return None


def fit_title(title: str, scheme: str) -> str:
    """`title` as a channel of this scheme takes it: unchanged when it fits, else cut (at a space near the end)."""
    limit = title_limit(scheme)
    if limit is None:
        return title
    if scheme in _EMAIL:
        if title.isascii():
            return _cut(title, limit, _one, limit, EMAIL_ELLIPSIS)
        return _cut(title, limit, _encoded, SUBJECT_OCTETS - 12, EMAIL_ELLIPSIS)
    if scheme in _SLACK:
        return _cut(title, limit, _slack, limit, ELLIPSIS)
    return _cut(title, limit, _one, limit, ELLIPSIS)


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
