"""Payload values made inert in chat markdown (the `md` format: Slack, Teams and the other chat services).

Apprise turns CommonMark's backslash escapes into each service's markup (and Teams renders them), so a value's
`<`, `>`, `[`, `]`, `(` and `)` escaped read the same while none can make a link, an image, HTML or a Slack
mention (`<!channel>`). Emphasis marks are left alone: their backslash would show on Slack, and they point nowhere.
"""

from __future__ import annotations

import re
import string

SPECIAL = frozenset("<>[]()")
_PUNCTUATION = frozenset(string.punctuation)  # what a CommonMark backslash escapes
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def escape_markdown(text: str) -> str:
    """`text` as literal CommonMark: its link, HTML and mention characters escaped, and each backslash that
    CommonMark would read as an escape (before punctuation, or last, before whatever follows) doubled."""
    out: list[str] = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        if ch in SPECIAL:
            out.append("\\" + ch)
        elif ch == "\\" and (i == last or text[i + 1] in _PUNCTUATION):
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def unescape_markdown(text: str) -> str:
    """CommonMark's backslash escapes undone: a title rendered by an `md` template, as the plain text it is."""
    return _ESCAPED.sub(r"\1", text)
