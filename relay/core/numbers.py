"""JSON numbers that are no number (`NaN`, `Infinity`, `1e400`): refused wherever relay reads JSON, naming the
field, rather than stored as a value no JSON encoder can write back."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Only a literal with an exponent of 100 or more, or with 200 digits or more, can overflow. The body is
# searched for one at C speed in a copy with every digit made 0, and each place found is read as the
# number around it: a string that only looks like one (a UUID's `b-036e623`) costs no walk.
_ZEROED = bytes.maketrans(b"123456789", b"000000000")
_MARKS = (b"e000", b"E000", b"e+000", b"E+000", b"0" * 200)
_RUN = re.compile(rb"[-+0-9.eE]*")
_PLACES = 20_000  # places read at most (a 1 MiB body of UUIDs has about 10,000): past them, walk
# A bare word the text has outside any string: NaN, Infinity, -Infinity.
_CONSTANT = re.compile(r"NaN|Infinity")


def may_hold_non_finite(raw: bytes) -> bool:
    """Whether the JSON text `raw` may hold a number literal that reads as infinity (False: it holds none)."""
    zeroed = raw.translate(_ZEROED)
    backwards = b""
    places = 0
    for mark in _MARKS:
        at = zeroed.find(mark)
        while at != -1:
            places += 1
            if places > _PLACES:
                return True
            backwards = backwards or raw[::-1]  # the run before `at` is read as the run after it, backwards
            start = at - (_run_end(backwards, len(raw) - at) - (len(raw) - at))
            end = _run_end(raw, at)
            # A letter or a digit next to it: part of a word, no number.
            word = raw[start - 1 : start].isalnum() or raw[end : end + 1].isalnum()
            if not word and _reads_infinite(raw[start:end]):
                return True
            at = zeroed.find(mark, end)
    return False


def _run_end(text: bytes, at: int) -> int:
    found = _RUN.match(text, at)
    return found.end() if found else at


def _reads_infinite(token: bytes) -> bool:
    try:
        return math.isinf(float(token))
    except ValueError:
        return False


def non_finite_at(data: Any) -> str | None:
    """The dotted path (`a.0.b`; the root: "") of the first infinite or NaN number in `data` (no recursion)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return ".".join(str(p) for p in path)
        elif isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(value))))
    return None


def constant_at(text: str) -> str | None:
    """Where `text` (refused as JSON) holds `NaN` or `Infinity`; None when not, or not JSON for other reasons."""
    if _CONSTANT.search(text) is None:
        return None
    try:
        return non_finite_at(json.loads(text))
    except (ValueError, RecursionError):
        return None
