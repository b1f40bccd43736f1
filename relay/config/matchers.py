"""Alertmanager's matchers (`name="v"`, `!=`, `=~`, `!~`) read against a notification. Pure.

The syntax is Alertmanager's classic one (pkg/labels/parse.go: quoted or bare values, several matchers
separated by commas, optionally in braces), the name a dotted path into the notification instead of a label.
Regexes are RE2, as Go's are (`google-re2`): the same syntax, and no look-around or backreferences.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import re2

# Where a matcher may look: a typo in the first segment would otherwise read "" for ever, silently.
ROOTS = ("body", "metadata", "sender", "kind")
_SCALAR_ROOTS = ("sender", "kind")
# '=~' before '=' so that the '~' is not read as part of the value (as in Alertmanager).
_MATCHER = re.compile(r"\s*([^\s=!~\"',{}]+)\s*(=~|!=|!~|=)\s*(.*?)\s*", re.DOTALL)
_SEGMENT = re.compile(r"[A-Za-z0-9_:\-]+")
_FIRST = re.compile(r"[A-Za-z_]")


class MatcherError(ValueError):
    """A matcher that cannot be used; the message names the matcher and what is wrong with it."""


class Op(enum.StrEnum):
    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


class _Structured:
    """What a path ending on an object or a list reads as: a non-empty value equal to no string."""

    def __repr__(self) -> str:
        return "<object or list>"


STRUCTURED = _Structured()


class Pattern(Protocol):
    programsize: int  # RE2's measure of the compiled program: its work on a text grows with it

    def fullmatch(self, text: str) -> object | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # the error is raised, and said by `relay check`: not also on stderr


def compile_regex(pattern: str) -> Pattern:
    """An RE2 regex, as Alertmanager compiles a matcher's; ValueError with RE2's reason when it refuses it."""
    try:
        compiled: Pattern = re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise ValueError(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
    return compiled


@dataclass(frozen=True)
class Matcher:
    text: str  # as the operator wrote it, to name it in messages
    path: tuple[str, ...]
    op: Op
    value: str
    regex: Pattern | None = None

    def matches(self, notification: Mapping[str, Any]) -> bool:
        found = read(notification, self.path)
        if found is STRUCTURED:
            return self.op in (Op.NE, Op.NRE)
        assert isinstance(found, str)
        if self.op is Op.EQ:
            return found == self.value
        if self.op is Op.NE:
            return found != self.value
        assert self.regex is not None
        # fullmatch: the regex must match the whole value, as Alertmanager's `^(?:re)$` does (RE2's `$` is the
        # end of the text, never before a final newline).
        hit = self.regex.fullmatch(found) is not None
        return hit if self.op is Op.RE else not hit


def node_at(data: Mapping[str, Any], path: Iterable[str]) -> Any:
    """The value at the dotted path's segments (a list indexed by a number); None where there is none."""
    node: Any = data
    for segment in path:
        if isinstance(node, Mapping):
            node = node.get(segment)
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return None
    return node


def read(data: Mapping[str, Any], path: Iterable[str]) -> str | _Structured:
    """Absent or null "", numbers and booleans their JSON text, objects and lists STRUCTURED."""
    node = node_at(data, path)
    if node is None:
        return ""
    if isinstance(node, str):
        return node
    if isinstance(node, Mapping | list):
        return STRUCTURED
    if isinstance(node, bool | int | float):
        return json.dumps(node)
    return str(node)


def all_match(matchers: Iterable[Matcher], notification: Mapping[str, Any]) -> bool:
    return all(m.matches(notification) for m in matchers)


def _unquote(raw: str, text: str) -> str:
    """A value as Alertmanager reads it: an optional pair of double quotes, and its escapes."""
    quoted = raw.startswith('"')
    body = raw[1:] if quoted else raw
    out: list[str] = []
    escaped = False
    for i, ch in enumerate(body):
        if escaped:
            escaped = False
            out.append({"n": "\n", '"': '"', "\\": "\\"}.get(ch, "\\" + ch))
            continue
        if ch == "\\" and i < len(body) - 1:
            escaped = True
        elif ch == '"':
            if not quoted or i < len(body) - 1:
                raise MatcherError(
                    f'matcher {text!r}: the value has a double quote inside it; write it as \\" '
                    f'(a quoted value is "..." with no other double quote)'
                )
            quoted = False
        else:
            out.append(ch)
    if quoted:
        raise MatcherError(f"matcher {text!r}: the value's opening double quote is not closed")
    return "".join(out)


def _path(name: str, text: str, scalars: tuple[str, ...] = ()) -> tuple[str, ...]:
    segments = tuple(name.split("."))
    if not all(_SEGMENT.fullmatch(s) for s in segments) or not _FIRST.match(name):
        raise MatcherError(f"matcher {text!r}: {name!r} is not a dotted path (letters, digits, _, :, - between dots)")
    root = segments[0]
    if root not in ROOTS + scalars:
        more = "".join(f", {s}" for s in scalars)
        raise MatcherError(
            f"matcher {text!r}: the name must be body.…, metadata.…, sender{more} or kind (it starts with {root!r})"
        )
    if root in _SCALAR_ROOTS + scalars and len(segments) > 1:
        raise MatcherError(f"matcher {text!r}: {root} is a plain string: it has no field {segments[1]!r}")
    if root not in _SCALAR_ROOTS + scalars and len(segments) == 1:
        raise MatcherError(f"matcher {text!r}: {root} is an object: name a field in it, like {root}.name")
    return segments


def parse_matcher(text: str, scalars: tuple[str, ...] = ()) -> Matcher:
    """MatcherError naming it and what is wrong; `scalars`: more names it may read (a silence's `channel`)."""
    found = _MATCHER.fullmatch(text)
    if found is None:
        raise MatcherError(
            f'matcher {text!r}: not like name="value" (operators: =, !=, =~, !~; the name a dotted path)'
        )
    name, op, raw = found.groups()
    if raw.startswith('="') and op in (Op.EQ, Op.NE):
        # `a=="x"` reads as `=` and the value `="x"`, which fails on its quote: say what was meant. (An
        # unquoted `a==x` stays the value `=x`, as in Alertmanager.)
        raise MatcherError(
            f"matcher {text!r}: {op}= is not an operator; write {name}{op}{raw[1:]} (the operators are =, !=, =~, !~)"
        )
    value = _unquote(raw, text)
    regex = None
    if op in (Op.RE, Op.NRE):
        try:
            regex = compile_regex(value)
        except ValueError as exc:
            raise MatcherError(f"matcher {text!r}: the regex {value!r} is not valid (RE2): {exc}") from None
    return Matcher(text.strip(), _path(name, text, scalars), Op(op), value, regex)


def _split(line: str) -> list[str]:
    """Alertmanager's ParseMatchers: braces around all or none; commas outside double quotes separate."""
    line = line.strip()
    if line.startswith("{") != line.endswith("}"):
        missing = "closing" if line.startswith("{") else "opening"
        raise MatcherError(f"matchers {line!r}: a {missing} brace is missing (braces go around all or none)")
    line = line.removeprefix("{").removesuffix("}")
    pieces: list[str] = []
    current: list[str] = []
    inside = escaped = False
    for ch in line:
        if ch == "," and not inside:
            pieces.append("".join(current))
            current = []
            continue
        if ch == '"':
            if escaped:
                escaped = False
            else:
                inside = not inside
        elif ch == "\\":
            escaped = not escaped
        else:
            escaped = False
        current.append(ch)
    last = "".join(current)
    if last.strip():
        pieces.append(last)
    return pieces


def parse_line(line: str, scalars: tuple[str, ...] = ()) -> list[Matcher]:
    """One entry of a `matchers:` list: one matcher, or several separated by commas; none for `{}` or ""."""
    if not isinstance(line, str):
        raise MatcherError(f"matcher {line!r}: not a string; write it in quotes, like 'kind=\"x\"'")
    pieces = _split(line)
    return [parse_matcher(piece.strip(), scalars) for piece in pieces]
