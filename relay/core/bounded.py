"""How large a string-building step of a template would be, worked out before it runs: the filters, `str`
methods and format strings whose result can be far larger than what they are given (`'x'|center(10**9)`,
`s|indent(10**8)`, `'{0:{1}}'.format('x', '>100000000')`). Each estimate is an upper bound, counted with
`relay.core.limits.charge`; every other filter's result is counted once it is built (linear in its input).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

from jinja2 import Environment, pass_eval_context
from jinja2.filters import make_attrgetter
from jinja2.nodes import EvalContext
from jinja2.runtime import Context

from relay.core.limits import MAX_VALUE, LimitExceeded, charge, check_width, size_of

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _values(args: Any) -> list[Any]:
    if isinstance(args, dict):
        return list(args.values())
    return list(args) if isinstance(args, tuple | list) else [args]


def percent_size(fmt: str, args: Any) -> int:
    """`fmt % args` (and the `format` filter): the format, each conversion's widths, and the values."""
    specs = 0
    widths = 0
    stars = 0
    for match in _PERCENT_SPEC.finditer(fmt):
        specs += 1
        for width in match.groups():
            if width == "*":
                stars += 1
            elif width:
                check_width(int(width))
                widths += int(width)
    values = _values(args)
    if stars:  # a `*` width or precision is taken from the values
        for value in values:
            check_width(value)
    sizes = _sizes(values)
    if isinstance(args, dict):  # `%(name)s` may use one value many times
        used = specs * max(sizes, default=0)
    else:
        used = sum(sizes)
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
    out = []
    for value in values:
        key = id(value)
        if key not in seen:
            seen[key] = size_of(value)
        out.append(seen[key])
    return out


def _replaced(s: str, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(s)
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * max(len(new) - len(old), 0)


def str_method_size(s: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
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
    return None


def bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's filters, each counting what it builds, the widening ones sized before they run."""
    out = {name: _counted(f, _ESTIMATES.get(name)) for name, f in filters.items()}
    out["join"] = _counted(_bounded_join(filters["join"]), None)
    out["sum"] = _counted(_bounded_sum(filters["sum"]), None)
    return out


def _counted(f: Callable[..., Any], estimate: Callable[..., int] | None) -> Callable[..., Any]:
    # functools.wraps also copies Jinja's marker of what a filter is passed (context, environment).
    @wraps(f)
    def counted(*args: Any, **kwargs: Any) -> Any:
        if estimate is not None:
            charge(estimate(*args, **kwargs), "a filter's result")
        result = f(*args, **kwargs)
        if estimate is None and isinstance(result, str | list | tuple):
            charge(len(result), "a filter's result")
        return result

    return counted


def _bounded_join(join: Callable[..., Any]) -> Callable[..., Any]:
    @pass_eval_context
    def bounded_join(eval_ctx: EvalContext, value: Iterable[Any], d: str = "", attribute: Any = None) -> Any:
        items = list(value)
        charge(len(items), "a list")
        if attribute is not None:
            items = list(map(make_attrgetter(eval_ctx.environment, attribute), items))
        charge(joined_size(items, _text(d)), "a joined string")
        return join(eval_ctx, items, d)

    return bounded_join


def _bounded_sum(add_up: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(add_up)
    def bounded_sum(environment: Any, iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
        if not isinstance(start, int | float):  # adding up lists copies them over and over
            raise LimitExceeded("sum adds up numbers only in templates")
        return add_up(environment, iterable, attribute=attribute, start=start)

    return bounded_sum


def _text(value: Any) -> str:
    """`str(value)`, refused before it is written out when it would be too long (a list holding one long
    string many times)."""
    if not isinstance(value, str) and size_of(value) > MAX_VALUE:
        raise LimitExceeded(f"a value of more than {MAX_VALUE:,} characters as text")
    return str(value)


def _as_text(*args: Any, **kwargs: Any) -> int:
    """Filters that turn their value into text (`string`, `tojson`, `upper`, ...): about its size as text."""
    value = next((a for a in args if not isinstance(a, EvalContext | Environment | Context)), "")
    return size_of(value)


def _center(value: Any, width: Any = 80) -> int:
    check_width(width)
    return max(size_of(value), _int(width))


def _indent(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> int:
    check_width(width)
    text = _text(s)
    step = len(width) if isinstance(width, str) else _int(width)
    return len(text) + (text.count("\n") + 1) * step


def _wordwrap(
    environment: Any,
    s: Any,
    width: Any = 79,
    break_long_words: bool = True,
    wrapstring: Any = None,
    break_on_hyphens: bool = True,
) -> int:
    text = _text(s)
    lines = len(text) // max(_int(width), 1) + text.count("\n") + 1
    return len(text) + lines * len(_text(wrapstring if wrapstring is not None else environment.newline_sequence))


def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: Any = None) -> int:
    return _replaced(_text(s), _text(old), _text(new), -1 if count is None else count)


def _format(value: Any, *args: Any, **kwargs: Any) -> int:
    return percent_size(_text(value), kwargs or args)


def _batch(value: Any, linecount: Any, fill_with: Any = None) -> int:
    check_width(linecount, "batch size")
    return 0


def _slice(value: Any, slices: Any, fill_with: Any = None) -> int:
    check_width(slices, "slice count")
    return 0


def _urlize(eval_ctx: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    text = _text(value)
    extra = sum(len(v) for v in (*args, *kwargs.values()) if isinstance(v, str))
    return 3 * len(text) + (len(text) // 2 + 1) * (extra + 40)


_ESTIMATES: dict[str, Callable[..., int]] = {
    "center": _center,
    "indent": _indent,
    "wordwrap": _wordwrap,
    "replace": _replace,
    "format": _format,
    "batch": _batch,
    "slice": _slice,
    "urlize": _urlize,
    **dict.fromkeys(
        (
            "capitalize",
            "e",
            "escape",
            "forceescape",
            "lower",
            "pprint",
            "safe",
            "string",
            "striptags",
            "title",
            "tojson",
            "trim",
            "truncate",
            "upper",
            "urlencode",
            "wordcount",
            "xmlattr",
        ),
        _as_text,
    ),
}
