"""The Jinja sandbox templates run in: immutable, with every way a template builds a value (operators, `~`, `str`
methods, `format`, filters, blocks and the output) put through `relay.core.limits` before the value exists."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import update_wrapper, wraps
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    FileSystemLoader,
    StrictUndefined,
    nodes,
    pass_context,
    pass_eval_context,
    select_autoescape,
)
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from markupsafe import Markup

from relay.core import limits
from relay.core.limits import built, charge, joined_size
from relay.core.markdown import escape_markdown
from relay.core.names import display_name

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"

__all__ = ["BUILTIN_DIR", "BoundedSandbox", "make_environment"]


class _BoundedCode(CodeGenerator):
    """A loop's items go through `environment.ticking` (the deadline); `a ~ b` has its parts measured first."""

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
        charge(limits.spec_size(value, format_spec), "a formatted string")
        return super().format_field(value, format_spec)


class _CountingEscapeFormatter(SandboxedEscapeFormatter, _CountingFormatter):
    pass


def _counted(f: Callable[..., Any], estimate: Callable[..., int] | None) -> Callable[..., Any]:
    """A filter or global sized before it runs (`estimate`), or its result counted once built."""

    @wraps(f)  # also copies Jinja's marker of what a filter is passed (context, environment)
    def counted(*args: Any, **kwargs: Any) -> Any:
        if estimate is None:
            return built(f(*args, **kwargs), "a filter's result")
        charge(estimate(*args, **kwargs), "a filter's result")
        return f(*args, **kwargs)

    return counted


def _bounded_join(join: Callable[..., Any]) -> Callable[..., Any]:
    @pass_eval_context
    def bounded_join(eval_ctx: EvalContext, value: Iterable[Any], d: str = "", attribute: Any = None) -> Any:
        items = list(value)
        charge(len(items), "a list")
        if attribute is not None:  # as Jinja's join looks it up: dotted, digits as indexes
            parts = attribute.split(".") if isinstance(attribute, str) else [attribute]
            for part in parts:
                key = int(part) if isinstance(part, str) and part.isdigit() else part
                items = [eval_ctx.environment.getitem(item, key) for item in items]
        charge(joined_size(items, limits.text(d)), "a joined string")
        return join(eval_ctx, items, d)

    return bounded_join


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every way to build a large value sized before it is built."""

    intercepted_binops = frozenset(["*", "**", "%", "+"])
    code_generator_class = _BoundedCode
    concat = staticmethod(limits.joined)
    ticking = staticmethod(limits.ticking)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, finalize=_finalize, **kwargs)
        self.filters = {name: _counted(f, limits.FILTER_SIZES.get(name)) for name, f in self.filters.items()}
        self.filters["join"] = _counted(_bounded_join(self.filters["join"]), None)
        self.globals["lipsum"] = _counted(self.globals["lipsum"], limits.lipsum_size)  # type: ignore[arg-type]

    def joining(self, parts: tuple[Any, ...]) -> tuple[Any, ...]:
        """The parts of a `~`, measured before they are joined."""
        charge(joined_size(list(parts), ""), "a joined string")
        return parts

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        limits.tick()
        owner = getattr(__obj, "__self__", None)
        if not isinstance(owner, str):
            return super().call(__context, __obj, *args, **kwargs)
        name = getattr(__obj, "__name__", "")
        if name == "join" and args:  # measure the items, then join what was measured
            args = (list(args[0]), *args[1:])
            charge(joined_size(args[0], owner), "a joined string")
        else:
            charge(limits.str_method_size(owner, name, args, kwargs), f"str.{name}")
        return built(super().call(__context, __obj, *args, **kwargs), f"str.{name}")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """The sandbox's `str.format` and `str.format_map`, through a formatter that sizes each field."""
        if super().wrap_str_format(value) is None:  # not a string's format or format_map
            return None
        f_self: str = value.__self__
        formatter: SandboxedFormatter = _CountingFormatter(self)
        if isinstance(f_self, Markup):
            formatter = _CountingEscapeFormatter(self, escape=f_self.escape)
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs, args = args[0], ()
            charge(len(f_self), "a format string")
            return type(f_self)(formatter.vformat(f_self, args, kwargs))

        return update_wrapper(wrapper, value)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        limits.check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)


def is_markdown(name: str | None) -> bool:
    """Whether a template file writes chat markdown (`*.md.j2`): its `{{ }}` values are escaped for it."""
    return name is not None and name.lower().endswith((".md.j2", ".md"))


@pass_context
def escape_for_markdown(context: Context, value: Any) -> Any:
    """In `md`, a value not marked safe is escaped for chat markdown and marked safe, so autoescape keeps it."""
    if is_markdown(context.name) and not hasattr(value, "__html__"):
        return Markup(escape_markdown(str(value)))
    return value


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    return limits.output(escape_for_markdown(context, value))


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
