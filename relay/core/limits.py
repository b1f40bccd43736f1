"""Every limit of a template's render, in one place (docs/templates.md, "Limits"): a deadline, a size for any
one value, a budget for everything it builds, and what each step would build, sized before it runs.

Only a loop or a call can keep a template busy, so the deadline is checked there (`tick`). C code (`str.center`,
`"".join`, `format`) cannot be interrupted, so what can build far more than it is given is sized before it runs
(each estimate an upper bound); anything else is counted once built (`built`), linear in its input.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment
from jinja2.nodes import EvalContext
from jinja2.runtime import Context

MAX_VALUE = 200_000  # characters (or items) of any one value a template builds, its output included
MAX_BUILT = 5_000_000  # characters one render may build and output in all
MAX_WIDTH = 100_000  # a width, precision, count or repetition a template may ask for
MAX_EXPONENT = 100  # of a number's `**`
RENDER_SECONDS = 2.0

_SMALL = 32  # what a number (or another object) costs as text, roughly
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")


class RenderError(Exception):
    pass


class LimitExceeded(RenderError):
    """A template asked for more than a render may spend: it falls back like any broken template."""


@dataclass
class _Render:
    deadline: float
    seconds: float
    left: int
    ticks: int = 0


_local = threading.local()


@contextmanager
def limited(seconds: float = RENDER_SECONDS, budget: int = MAX_BUILT) -> Iterator[None]:
    """Run a render under the limits. A render inside another one (a digest's item) runs under the outer one's."""
    if getattr(_local, "render", None) is not None:
        yield
        return
    _local.render = _Render(time.monotonic() + seconds, seconds, budget)
    try:
        yield
    finally:
        _local.render = None


def tick() -> None:
    """One step of a loop or one call: past the deadline, the render stops (the clock is read every 64th)."""
    current: _Render | None = getattr(_local, "render", None)
    if current is None:
        return
    current.ticks += 1
    if current.ticks & 63 == 0 and time.monotonic() > current.deadline:
        raise LimitExceeded(f"rendering took longer than {current.seconds:g}s")


def ticking(items: Iterable[Any]) -> Iterator[Any]:
    """The items of a template's loop, stopped at the render's deadline."""
    for item in items:
        tick()
        yield item


def charge(size: int, what: str = "a value") -> None:
    """Count `size` characters a template is about to build (or has built) against the limits."""
    if size > MAX_VALUE:
        raise LimitExceeded(f"{what} of more than {MAX_VALUE:,} characters")
    current: _Render | None = getattr(_local, "render", None)
    if current is not None:
        current.left -= size
        if current.left < 0:
            raise LimitExceeded(f"the template built more than {MAX_BUILT:,} characters")


def built(result: Any, what: str) -> Any:
    """A string or list just built (in time linear in its input), counted."""
    if isinstance(result, str | list | tuple):
        charge(len(result), what)
    return result


def joined(parts: Iterable[str]) -> str:
    """A template's or a block's output, joined: one value, stopped as soon as it is too long."""
    pieces: list[str] = []
    size = 0
    for part in parts:
        size += len(part)
        if size > MAX_VALUE:
            break
        pieces.append(part)
    charge(size, "output")
    return "".join(pieces)


def output(value: Any) -> Any:
    """Count an output value against the budget, as at least 1 (a buffer of empty strings is bounded too)."""
    charge(max(size_of(value), 1), "an output value")
    return value


def size_of(value: Any, cap: int = MAX_VALUE) -> int:
    """About `len(str(value))`, counted up to a little over `cap` without writing the value out."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        parts: Any = (p for kv in value.items() for p in kv)
    elif isinstance(value, list | tuple | set | frozenset):
        parts = iter(value)
    else:
        return _SMALL
    total = 2
    for part in parts:
        total += 2 + size_of(part, cap - total)
        if total > cap:
            break
    return total


def check_width(value: Any, what: str = "width") -> None:
    if abs(_int(value)) > MAX_WIDTH:
        raise LimitExceeded(f"{what} too large (more than {MAX_WIDTH:,})")


def text(value: Any) -> str:
    """`str(value)`, refused before it is written out when it would be too long."""
    if not isinstance(value, str) and size_of(value) > MAX_VALUE:
        raise LimitExceeded(f"a value of more than {MAX_VALUE:,} characters as text")
    return str(value)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _count(value: Any) -> int:
    return max(_int(value), 1)


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def check_binop(op: str, left: Any, right: Any) -> None:
    """`left <op> right` for `*`, `**`, `%` and `+`, refused before it runs when its result would be too large."""
    if op == "**":
        if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
            raise LimitExceeded("exponent too large")
    elif op == "%":
        if isinstance(left, str):
            charge(percent_size(left, right), "a formatted string")
    elif op == "+":
        if _sized(left) and _sized(right):
            charge(len(left) + len(right), "a concatenation")
    else:
        for seq, count in ((left, right), (right, left)):
            if _sized(seq) and isinstance(count, int):
                check_width(count, "sequence repetition")
                charge(len(seq) * max(count, 0), "a repetition")


def percent_size(fmt: str, args: Any) -> int:
    """`fmt % args` (and the `format` filter): the format, each conversion's widths, and the values."""
    specs = widths = stars = 0
    for match in _PERCENT_SPEC.finditer(fmt):
        specs += 1
        for width in match.groups():
            if width == "*":
                stars += 1
            elif width:
                check_width(int(width))
                widths += int(width)
    values = list(args.values()) if isinstance(args, dict) else list(args) if isinstance(args, tuple | list) else [args]
    if stars:  # a `*` width or precision is taken from the values
        for value in values:
            check_width(value)
    sizes = _sizes(values)
    used = specs * max(sizes, default=0) if isinstance(args, dict) else sum(sizes)  # `%(name)s`: used many times
    return len(fmt) + widths + stars * max((abs(_int(v)) for v in values), default=0) + used


def spec_size(value: Any, spec: str) -> int:
    """`format(value, spec)` as `str.format` calls it, its nested fields already filled in."""
    numbers = [int(n) for n in _DIGITS.findall(spec)]
    for number in numbers:
        check_width(number, "format width or precision")
    return size_of(value) + sum(numbers)


def joined_size(items: list[Any], sep: str) -> int:
    return sum(_sizes(items)) + len(sep) * max(len(items) - 1, 0)


def _sizes(values: list[Any]) -> list[int]:
    """size_of each value, measured once per object (a tuple may hold one list many times)."""
    seen: dict[int, int] = {}
    for value in values:
        if id(value) not in seen:
            seen[id(value)] = size_of(value)
    return [seen[id(value)] for value in values]


def _replaced(s: str, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(s)
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * max(len(new) - len(old), 0)


def str_method_size(s: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The size of what `s.<name>(...)` builds, for the methods that can build more than a few times `s`."""
    given = [*args, *kwargs.values()]
    first = _int(given[0]) if given else 0
    if name in ("center", "ljust", "rjust", "zfill"):
        check_width(first)
        return max(len(s), first)
    if name == "expandtabs":
        check_width(first)
        return len(s) + s.count("\t") * (first if given else 8)
    if name == "replace" and len(given) >= 2:
        return _replaced(s, *given[:3])
    if name == "translate" and given and isinstance(given[0], dict):
        longest = max((len(v) for v in given[0].values() if isinstance(v, str)), default=1)
        return len(s) * max(longest, 1)
    return 0


# --- filters and globals whose result can be far larger than what they are given: sized before they run ---


def _as_text(*args: Any, **kwargs: Any) -> int:
    """Filters that turn their value into text (`string`, `tojson`, `upper`, ...): about its size as text."""
    return size_of(next((a for a in args if not isinstance(a, EvalContext | Environment | Context)), ""))


def _center(value: Any, width: Any = 80) -> int:
    check_width(width)
    return max(size_of(value), _int(width))


def _indent(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> int:
    check_width(width)
    lines = text(s)
    return len(lines) + (lines.count("\n") + 1) * (len(width) if isinstance(width, str) else _int(width))


def _wordwrap(
    environment: Any,
    s: Any,
    width: Any = 79,
    break_long_words: bool = True,
    wrapstring: Any = None,
    break_on_hyphens: bool = True,
) -> int:
    words = text(s)
    lines = len(words) // _count(width) + words.count("\n") + 1
    return len(words) + lines * len(text(wrapstring if wrapstring is not None else environment.newline_sequence))


def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> int:
    return _replaced(text(s), text(old), text(new), -1 if count is None else count)


def _format(value: Any, *args: Any, **kwargs: Any) -> int:
    return percent_size(text(value), kwargs or args)


def _batch(value: Any, linecount: Any, fill_with: Any = None) -> int:
    check_width(linecount, "batch size")
    return 0


def _slice(value: Any, slices: Any, fill_with: Any = None) -> int:
    check_width(slices, "slice count")
    return 0


def _urlize(eval_ctx: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    words = text(value)
    extra = sum(len(v) for v in (*args, *kwargs.values()) if isinstance(v, str))
    return 3 * len(words) + (len(words) // 2 + 1) * (extra + 40)


def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> int:
    if not isinstance(start, int | float):  # adding up lists copies them over and over
        raise LimitExceeded("sum adds up numbers only in templates")
    return 0


def lipsum_size(n: Any = 5, html: Any = True, min: Any = 20, max: Any = 100) -> int:  # lipsum's own names
    return _count(n) * _count(max) * 12


_TEXT_FILTERS = "capitalize e escape forceescape lower pprint safe string striptags title tojson trim truncate"
FILTER_SIZES: dict[str, Callable[..., int]] = {
    "center": _center,
    "indent": _indent,
    "wordwrap": _wordwrap,
    "replace": _replace,
    "format": _format,
    "batch": _batch,
    "slice": _slice,
    "urlize": _urlize,
    "sum": _sum,
    **dict.fromkeys((*_TEXT_FILTERS.split(), "upper", "urlencode", "wordcount", "xmlattr"), _as_text),
}
