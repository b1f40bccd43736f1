"""JSON numbers that are no number: `NaN` and `Infinity` (not JSON, though some encoders write them) and
literals past the range of a double (`1e400`, valid JSON that every Python parser reads as infinity).
relay refuses both wherever it reads JSON, naming the field, rather than store a value that no JSON
encoder can write back."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Only a literal with an exponent of three digits or more, or with 200 digits or more, can overflow: the
# walk below runs when the text has one (or something like one in a string, which costs a walk only).
_MAY_OVERFLOW = re.compile(r"[eE][+]?0*[1-9][0-9]{2}|[0-9]{200}")
# A bare word the text has outside any string: NaN, Infinity, -Infinity.
_CONSTANT = re.compile(r"NaN|Infinity")


def may_hold_non_finite(text: str) -> bool:
    """Whether `text` may hold a number that reads as infinity or NaN (False: it certainly holds none)."""
    return _MAY_OVERFLOW.search(text) is not None or _CONSTANT.search(text) is not None


def non_finite_at(data: Any) -> str | None:
    """The dotted path (`a.0.b`; the root: "") of the first number in `data` that is infinite or NaN, or None.

    Walks with a stack of its own, so that no nesting makes it recurse."""
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
    """Where `text` (refused as JSON) holds `NaN` or `Infinity`, read by a parser that takes them; None when it
    holds none, or is not JSON for other reasons as well."""
    if _CONSTANT.search(text) is None:
        return None
    try:
        return non_finite_at(json.loads(text))
    except (ValueError, RecursionError):
        return None
