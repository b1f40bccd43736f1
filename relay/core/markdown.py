"""Payload values made inert in chat markdown (the `md` format: Slack, Teams and the other chat services).

An `md` body is CommonMark that Apprise turns into each service's own markup: for Slack, `\\<` becomes `&lt;`,
`\\>` `&gt;`, a bare `&` `&amp;` and `\\[`, `\\(` plain brackets (mrkdwn); a Teams card renders CommonMark's
backslash escapes itself. So escaping a value's `<`, `>`, `[`, `]`, `(` and `)` with a backslash leaves what
people read the same while nothing in it can be a link, an image, an autolink, HTML or a Slack mention
(`<!channel>`, `<@U1>`, `<https://x|label>`). Emphasis marks (`*`, `_`, `` ` ``, `~`) are left as they
are: Apprise keeps a backslash before them for Slack, which would show, and they point nowhere.
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
