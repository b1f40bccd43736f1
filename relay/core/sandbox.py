"""The Jinja sandbox templates run in: immutable, and bounded in what one render may build, so an operator's
template cannot exhaust a worker (docs/templates.md, "Limits").

Every way a template builds a string passes a check before the string exists: `*`, `+`, `%` and `**`
(`call_binop`), `~` (the code generator below), `str` methods (`call`), `str.format` (its formatter), the
filters (`relay.core.bounded`), and the buffers of `{% set %}` blocks, macros and `{% filter %}` blocks
(`concat`, which compiled templates use for them). Each value output is counted too (`finalize`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from functools import update_wrapper
from pathlib import Path
from types import BuiltinMethodType, MethodType
from typing import Any

from jinja2 import BaseLoader, ChoiceLoader, FileSystemLoader, StrictUndefined, nodes, pass_context, select_autoescape
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from markupsafe import Markup

from relay.core.bounded import bounded_filters, joined_size, percent_size, spec_size, str_method_size
from relay.core.limits import (
    MAX_VALUE,
    LimitExceeded,
    RenderError,
    charge,
    check_width,
    size_of,
    tick,
    ticking,
)
from relay.core.markdown import escape_markdown
from relay.core.names import display_name

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"

__all__ = ["BUILTIN_DIR", "BoundedSandbox", "LimitExceeded", "RenderError", "make_environment"]


class _BoundedCode(CodeGenerator):
    """Compiles templates as Jinja does, but a loop takes its items through `environment.ticking` (stopped at
    the render's deadline), and `a ~ b` has its parts measured first (`BoundedSandbox.joining`)."""

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        items = nodes.Call(nodes.EnvironmentAttribute("ticking"), [node.iter], [], None, None, lineno=node.lineno)
        ticked = nodes.For(node.target, items, node.body, node.else_, node.test, node.recursive, lineno=node.lineno)
        super().visit_For(ticked, frame)

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"{func_name}(environment.joining((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")


class _CountingFormatter(SandboxedFormatter):
    """`str.format` in the sandbox, each field sized (its nested fields filled in) before it is formatted."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        charge(spec_size(value, format_spec), "a formatted string")
        return super().format_field(value, format_spec)


class _CountingEscapeFormatter(SandboxedEscapeFormatter, _CountingFormatter):
    pass


def _count_output(value: Any) -> Any:
    """Each value a template outputs (into a body, a `{% set %}` block or a macro) counts against the render's
    budget: one counted as at least 1, so a buffer of empty strings is bounded too."""
    charge(max(size_of(value), 1), "an output value")
    return value


def _bounded_concat(parts: Iterable[str]) -> str:
    """What compiled templates join a block's buffer with (and `Template.render` its output)."""
    pieces: list[str] = []
    size = 0
    for part in parts:
        size += len(part)
        if size > MAX_VALUE:
            charge(size, "a block's output")  # raises
        pieces.append(part)
    charge(size, "a block's output")
    return "".join(pieces)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every way to build a large value sized before it is built."""

    intercepted_binops = frozenset(["*", "**", "%", "+"])
    code_generator_class = _BoundedCode
    concat = staticmethod(_bounded_concat)
    ticking = staticmethod(ticking)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, finalize=_finalize, **kwargs)
        self.filters = bounded_filters(self.filters)
        lipsum: Callable[..., Any] = self.globals["lipsum"]  # type: ignore[assignment]

        def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> Any:
            charge(_positive(n) * _positive(max) * 12, "lipsum")
            return lipsum(n, html, min, max)

        self.globals["lipsum"] = bounded_lipsum

    def joining(self, parts: tuple[Any, ...]) -> tuple[Any, ...]:
        """The parts of a `~`, measured before they are joined."""
        charge(sum(size_of(p) for p in parts), "a joined string")
        return parts

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        tick()
        owner = getattr(__obj, "__self__", None)
        if not isinstance(owner, str):
            return super().call(__context, __obj, *args, **kwargs)
        name = getattr(__obj, "__name__", "")
        if name == "join" and args:  # measure the items, then join what was measured
            items = list(args[0])
            charge(joined_size(items, owner), "a joined string")
            args = (items, *args[1:])
        else:
            size = str_method_size(owner, name, args, kwargs)
            if size is not None:
                charge(size, f"str.{name}")
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str | list | tuple):
            charge(len(result), f"str.{name}")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """The sandbox's `str.format` and `str.format_map`, through a formatter that sizes each field."""
        if not isinstance(value, MethodType | BuiltinMethodType) or value.__name__ not in ("format", "format_map"):
            return None
        f_self = value.__self__
        if not isinstance(f_self, str):
            return None
        str_type = type(f_self)
        formatter: SandboxedFormatter
        if isinstance(f_self, Markup):
            formatter = _CountingEscapeFormatter(self, escape=f_self.escape)
        else:
            formatter = _CountingFormatter(self)
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            charge(len(f_self), "a format string")
            return str_type(formatter.vformat(f_self, args, kwargs))

        return update_wrapper(wrapper, value)

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            if isinstance(right, int | float) and abs(right) > 100:
                raise LimitExceeded("exponent too large")
            return operator.pow(left, right)
        if operator_ == "%":
            if not isinstance(left, str):
                return operator.mod(left, right)
            charge(percent_size(left, right), "a formatted string")
            return operator.mod(left, right)
        if operator_ == "+":
            if _sized(left) and _sized(right):
                charge(len(left) + len(right), "a concatenation")
            return operator.add(left, right)
        for seq, count in ((left, right), (right, left)):
            if _sized(seq) and isinstance(count, int):
                check_width(count, "sequence repetition")
                charge(len(seq) * max(count, 0), "a repetition")
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


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    return _count_output(escape_for_markdown(context, value))


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def _positive(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 1


def make_environment(template_dir: Path | None) -> BoundedSandbox:
    loaders: list[BaseLoader] = []
    if template_dir is not None:
        loaders.append(FileSystemLoader(str(template_dir)))
    loaders.append(FileSystemLoader(str(BUILTIN_DIR)))
    env = BoundedSandbox(
        loader=ChoiceLoader(loaders),
        undefined=StrictUndefined,
        # md too: autoescape is what marks a macro's output and a `{% set %}` block as done (not escaped again);
        # `escape_for_markdown` (in the sandbox's finalize) escapes, before Jinja's HTML escape would.
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2", "md", "md.j2"), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["display_name"] = display_name  # `{{ ref|display_name }}`: the name the context's `names` has
    return env
