"""Config problems in relay's words, `<key path>: <what is wrong>; <how to fix it>`, a misspelt name answered
with the nearest known one."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

# Keys of the Config model that are not written in the file.
_INTERNAL = {"base_dir"}


def key_path(loc: Sequence[str | int]) -> str:
    """('routes', 2, 'channels', 0) -> routes[2].channels[0]: how an operator finds the place in YAML."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name nearest to a misspelt one, if any is near enough."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_name(what: str, name: str, known: list[str], where: str) -> str:
    """`unknown channel 'x'; did you mean 'y'? The channels defined are: a, b` (or how to define one)."""
    message = f"unknown {what} {name!r}"
    if not known:
        return f"{message}; no {what}s are defined: add it under `{where}:`"
    near = did_you_mean(name, known)
    listed = ", ".join(known)
    if near:
        return f"{message}; did you mean {near!r}? The {what}s defined are: {listed}"
    return f"{message}; the {what}s defined are: {listed}"


def is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def unwrap(tp: Any) -> Any:
    """The type itself, without Annotated or Optional around it."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif is_union(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _walk(model: type[BaseModel], loc: Sequence[str | int]) -> tuple[list[str | int], Any, bool]:
    """The location as written (without the union member's name pydantic adds), the type at its parent (whose
    keys an unknown key is compared with), and whether the error is one union member's."""
    tp: Any = model
    parent: Any = None
    clean: list[str | int] = []
    in_union = False
    for part in loc:
        tp = unwrap(tp)
        parent = tp
        if is_union(tp) and isinstance(part, str):
            tp, in_union = None, True  # a union member's name, not a key
            continue
        clean.append(part)
        tp = member_type(tp, part)
    return clean, parent, in_union


def member_type(tp: Any, part: str | int) -> Any:
    """The type of item `part` of a list, of key `part` of a model or a mapping; None when it has none."""
    if isinstance(part, int):
        return get_args(tp)[0] if get_origin(tp) is list and get_args(tp) else None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        info = next((f for n, f in tp.model_fields.items() if part in (n, f.alias)), None)
        return info.annotation if info is not None else None
    return get_args(tp)[1] if get_origin(tp) is dict and get_args(tp) else None


def _keys(model: Any) -> list[str]:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    return [f.alias or n for n, f in model.model_fields.items() if n not in _INTERNAL]


def _number(value: Any) -> str:
    """` (it is 0)` for a number; nothing for other input, which could be a secret put in the wrong key."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f" (it is {value:g})" if isinstance(value, float) else f" (it is {value})"
    return ""


_FIXED = {
    **dict.fromkeys(("int_parsing", "int_type"), "must be a whole number"),
    **dict.fromkeys(("float_parsing", "float_type"), "must be a number"),
    **dict.fromkeys(("bool_parsing", "bool_type"), "must be true or false"),
    "string_type": "must be text; put it in quotes",
    "list_type": "must be a list, like [a, b] (or one `- item` a line)",
    **dict.fromkeys(
        ("dict_type", "model_type", "model_attributes_type"),
        "must be a mapping of keys, like {key: value} (or one `key: value` a line)",
    ),
}


def _sentence(e: ErrorDetails, parent: Any) -> str:
    kind, ctx, value = e["type"], e.get("ctx") or {}, e.get("input")
    if kind in ("value_error", "assertion_error"):
        # relay's own validators already say what is wrong and how to write it.
        return e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in _FIXED:
        # `host:` with nothing after it reads as null.
        return _FIXED[kind] + (" (it is empty: write a value after the colon)" if value is None else "")
    if kind == "int_from_float":
        return f"must be a whole number{_number(value)}"
    if kind == "missing":
        return "missing; this key is required"
    if kind == "extra_forbidden":
        name, known = str(e["loc"][-1]), _keys(parent)
        near = did_you_mean(name, known)
        if near:
            return f"unknown key; did you mean `{near}`?"
        return f"unknown key; the keys here are: {', '.join(known)}" if known else "unknown key"
    bounds = {
        "greater_than": "must be more than {gt}",
        "greater_than_equal": "must be at least {ge}",
        "less_than": "must be less than {lt}",
        "less_than_equal": "must be at most {le}",
    }
    if kind in bounds:
        return bounds[kind].format(**ctx) + _number(value)
    if kind in ("too_short", "too_long"):
        least, most = ctx.get("min_length"), ctx.get("max_length")
        return f"must have at least {least} item(s)" if kind == "too_short" else f"must have at most {most} item(s)"
    if kind == "string_too_short":
        return f"must be at least {ctx.get('min_length')} character(s) long"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind in ("literal_error", "enum"):
        return f"must be {ctx.get('expected')}"
    if kind == "string_pattern_mismatch":
        return f"is not of the form this key takes (the pattern {ctx.get('pattern')})"
    if kind.startswith("url"):
        return f"is not a valid URL ({e['msg'].lower()})"
    # Anything else in pydantic's words, made to read like the rest.
    return e["msg"].replace("Input should be", "must be").replace("Input", "the value")


def validation_problems(err: ValidationError, model: type[BaseModel]) -> list[str]:
    """Each error pydantic found as `key.path[i]: what is wrong; how to fix it`, a union's as one sentence."""
    out: list[str] = []
    unions: dict[str, int] = {}  # key path -> index in out of its union sentence
    for e in err.errors():
        loc, parent, in_union = _walk(model, e["loc"])
        where, sentence = key_path(loc), _sentence(e, parent)
        if in_union and where in unions:
            i = unions[where]
            out[i] += " or " + sentence.removeprefix("must be ")
            continue
        if in_union:
            unions[where] = len(out)
        out.append(f"{where}: {sentence}" if where else sentence)
    return out
