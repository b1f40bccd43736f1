"""The Jinja sandbox templates run in: immutable, and bounded in what one render may build (no string a
billion characters wide, no huge ranges), so an operator's template cannot exhaust a worker."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, ChoiceLoader, FileSystemLoader, StrictUndefined, pass_context, select_autoescape
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from relay.core.markdown import escape_markdown

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"
MAX_SEQUENCE = 100_000


class RenderError(Exception):
    pass


def _too_wide(values: Any) -> bool:
    """Any integer in `values` (a width, a count) that would build an oversized string."""
    items = values if isinstance(values, tuple | list) else (values,)
    return any(isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_SEQUENCE for v in items)


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?")
_BRACE_SPEC = re.compile(r"\{[^{}]*:([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def _oversized_format(fmt: str, args: Any, kwargs: dict[str, Any] | None = None) -> bool:
    """A format string whose widths (written in it, or taken from the arguments) would build a huge string."""
    dynamic = False
    for match in _PERCENT_SPEC.finditer(fmt):
        for width in match.groups():
            if width == "*":
                dynamic = True
            elif width and int(width) > MAX_SEQUENCE:
                return True
    for match in _BRACE_SPEC.finditer(fmt):
        spec = match.group(1)
        dynamic = dynamic or "{" in spec
        if any(int(n) > MAX_SEQUENCE for n in re.findall(r"\d+", re.sub(r"\{[^{}]*\}", "", spec))):
            return True
    values = (tuple(args) if isinstance(args, tuple | list) else (args,)) + tuple((kwargs or {}).values())
    return dynamic and _too_wide(values)


# str methods whose integer argument is the length of what they build ('x'.center(10**9)).
_WIDENING = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, plus bounds on what can build huge values (`*`, `**`, `%`, widening string
    methods, the `format` filter), so a template cannot exhaust memory."""

    intercepted_binops = frozenset(["*", "**", "%"])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        builtin_format = self.filters["format"]

        def bounded_format(value: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(value, str) and _oversized_format(value, args, kwargs):
                raise RenderError("format width too large")
            return builtin_format(value, *args, **kwargs)

        self.filters["format"] = bounded_format

    def call(self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(__obj, "__name__", "")
        if isinstance(getattr(__obj, "__self__", None), str) and name in _WIDENING and _too_wide(args):
            raise RenderError(f"str.{name} width too large")
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """The sandbox's own `str.format` wrapper, refusing widths that would build a huge string."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt: str = value.__self__

        def bounded(*args: Any, **kwargs: Any) -> str:
            if _oversized_format(fmt, args, kwargs):
                raise RenderError("format width too large")
            return wrapped(*args, **kwargs)

        return bounded

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "%":
            if isinstance(left, str) and _oversized_format(left, right):
                raise RenderError("format width too large")
            return operator.mod(left, right)
        if operator_ == "**":
            if isinstance(right, int | float) and abs(right) > 100:
                raise RenderError("exponent too large")
            return operator.pow(left, right)
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_SEQUENCE:
                raise RenderError("sequence repetition too large")
        return operator.mul(left, right)


def is_markdown(name: str | None) -> bool:
    """Whether a template file writes chat markdown (`*.md.j2`): its `{{ }}` values are escaped for it."""
    return name is not None and name.lower().endswith((".md.j2", ".md"))


@pass_context
def escape_for_markdown(context: Context, value: Any) -> Any:
    """The `finalize` of every `{{ }}`: in an `md` template a value is escaped for chat markdown (relay.core.
    markdown) and marked done, so that autoescape keeps it as is; a value already marked (`|safe`, a macro's
    output, a `{% set %}` block) is left alone. HTML templates keep Jinja's own HTML escaping; txt none."""
    if is_markdown(context.name) and not hasattr(value, "__html__"):
        return Markup(escape_markdown(str(value)))
    return value


def make_environment(template_dir: Path | None) -> BoundedSandbox:
    loaders: list[BaseLoader] = []
    if template_dir is not None:
        loaders.append(FileSystemLoader(str(template_dir)))
    loaders.append(FileSystemLoader(str(BUILTIN_DIR)))
    env = BoundedSandbox(
        loader=ChoiceLoader(loaders),
        undefined=StrictUndefined,
        # md too: autoescape is what marks a macro's output and a `{% set %}` block as done (not escaped again);
        # `escape_for_markdown` does the escaping itself, before Jinja's HTML escape would.
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2", "md", "md.j2"), default_for_string=False),
        finalize=escape_for_markdown,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    return env
