"""Titles and bodies: per-kind Jinja templates in a sandbox, or the platform's own text.

Payload values reach templates only as data; a `{{ }}` inside a payload is never evaluated.
A template that fails falls back to the platform's text, and says why (`Rendered.error`).
"""

from __future__ import annotations

import html
import operator
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    FileSystemLoader,
    StrictUndefined,
    Template,
    TemplateNotFound,
    select_autoescape,
)
from jinja2.sandbox import ImmutableSandboxedEnvironment

from relay.model import Notification, PlannedDelivery, kind_name, recipient_type_name

BUILTIN_DIR = Path(__file__).parent / "builtin_templates"
FORMATS = ("md", "html", "txt")
MAX_OUTPUT_CHARS = 200_000
MAX_SEQUENCE = 100_000
RENDER_SECONDS = 2.0
PLATFORM = "platform"
AUTO = "auto"


class RenderError(Exception):
    pass


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, plus bounds on `*` and `**` so a template cannot exhaust memory."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            if isinstance(right, int | float) and abs(right) > 100:
                raise RenderError("exponent too large")
            return operator.pow(left, right)
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_SEQUENCE:
                raise RenderError("sequence repetition too large")
        return operator.mul(left, right)


def make_environment(template_dir: Path | None) -> BoundedSandbox:
    loaders: list[BaseLoader] = []
    if template_dir is not None:
        loaders.append(FileSystemLoader(str(template_dir)))
    loaders.append(FileSystemLoader(str(BUILTIN_DIR)))
    env = BoundedSandbox(
        loader=ChoiceLoader(loaders),
        undefined=StrictUndefined,
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    return env


@dataclass(frozen=True)
class Rendered:
    title: str
    body: str
    format: str  # "txt", "md" or "html": what `body` is written in
    template: str  # the template file used, or "platform"
    error: str | None = None  # why a template was not used, when it failed


def candidates(template: str, kind: str, recipient_types: list[str], fmt: str) -> list[str]:
    """Template files to try, most specific first (see README, "Templates")."""
    if template == PLATFORM:
        return []
    if template != AUTO:
        return [f"{template}.{fmt}.j2"]
    kname = kind_name(kind)
    names = [f"{kname}/{recipient_type_name(t)}.{fmt}.j2" for t in recipient_types]
    names.append(f"{kname}/default.{fmt}.j2")
    return list(dict.fromkeys(names))


def _bounded(chunks: Iterator[str], deadline: float) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_OUTPUT_CHARS:
            raise RenderError(f"output larger than {MAX_OUTPUT_CHARS} characters")
        if time.monotonic() > deadline:
            raise RenderError(f"rendering took longer than {RENDER_SECONDS:g}s")
        out.append(chunk)
    return "".join(out)


def _empty_block(context: Any) -> Iterator[str]:
    return iter(())


def render_template(tpl: Template, context: dict[str, Any], fmt: str) -> tuple[str | None, str]:
    """(title from the `title` block or None, body without that block)."""
    deadline = time.monotonic() + RENDER_SECONDS
    title: str | None = None
    if "title" in tpl.blocks:
        title = _bounded(tpl.blocks["title"](tpl.new_context(context)), deadline).strip()
        if fmt == "html":
            title = html.unescape(title)
        title = " ".join(title.split())
    ctx = tpl.new_context(context)
    ctx.blocks["title"] = [_empty_block]
    body = _bounded(tpl.root_render_func(ctx), deadline).strip()
    return title, body


def build_context(
    notification: Notification, delivery: PlannedDelivery, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    message = notification.messages[delivery.message_index]
    payload = notification.model_dump(mode="json")
    msg = payload["messages"][delivery.message_index]
    recipient = dict(delivery.recipient) if delivery.recipient is not None else None
    if recipient is not None and delivery.address:
        recipient.setdefault("email", delivery.address)
    context: dict[str, Any] = {
        "notification": payload,
        "kind": notification.kind,
        "kind_name": kind_name(notification.kind),
        "body": payload["body"],
        "metadata": payload["metadata"],
        "message": {**msg, "title": message.title or "", "message": message.message or ""},
        "recipient_type": delivery.recipient_type,
        "recipients": msg.get("recipients", []),
        "recipient": recipient,
        "channel": delivery.channel,
    }
    if extra:
        context.update(extra)
    return context


def platform_text(notification: Notification, delivery: PlannedDelivery) -> tuple[str, str]:
    message = notification.messages[delivery.message_index]
    return (message.title or "").strip(), (message.message or "").strip()


class Renderer:
    """Looks templates up and renders them; one per process, templates compiled once."""

    def __init__(self, template_dir: Path | None, extra_context: dict[str, Any] | None = None) -> None:
        self.env = make_environment(template_dir)
        self.extra = extra_context or {}

    def find(self, names: list[str]) -> Template | None:
        for name in names:
            try:
                return self.env.get_template(name)
            except TemplateNotFound:
                continue
        return None

    def render(self, notification: Notification, delivery: PlannedDelivery, fmt: str) -> Rendered:
        message = notification.messages[delivery.message_index]
        types = [t for t in (message.recipientType_v2, delivery.recipient_type, message.recipientType) if t]
        names = candidates(delivery.template, notification.kind, types, fmt)
        title, text = platform_text(notification, delivery)
        error: str | None = None
        tpl: Template | None = None
        try:
            tpl = self.find(names)
            if tpl is not None:
                context = build_context(notification, delivery, self.extra)
                t_title, body = render_template(tpl, context, fmt)
                return Rendered(t_title if t_title is not None else title, body, fmt, tpl.name or "?")
            if delivery.template not in (AUTO, PLATFORM):
                error = f"template {names[0]} not found"
        except Exception as exc:  # any template failure: fall back, never lose the message
            where = tpl.name if tpl is not None else ", ".join(names)
            error = f"{where}: {type(exc).__name__}: {exc}"
        return self.platform(title, text, fmt, error)

    def platform(self, title: str, text: str, fmt: str, error: str | None) -> Rendered:
        """The platform's text verbatim; HTML channels get it inside a layout, escaped, never altered."""
        if fmt == "html":
            layout = self.find(["_layouts/platform.html.j2"])
            if layout is not None:
                try:
                    _, body = render_template(layout, {"title": title, "text": text}, "html")
                    return Rendered(title, body, "html", PLATFORM, error)
                except Exception as exc:  # the layout is ours; still never lose the message
                    error = error or f"layout: {exc}"
        return Rendered(title, text, "txt", PLATFORM, error)
