"""Titles and bodies: per-kind Jinja templates in a sandbox (payload values only as data), or the platform's
own text, to which a failing template falls back, saying why (`Rendered.error`)."""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from jinja2 import (
    FileSystemLoader,
    Template,
    TemplateNotFound,
    nodes,
)
from jinja2.runtime import Context

from relay.config import Config
from relay.core.limits import RENDER_SECONDS, joined, limited
from relay.core.markdown import unescape_markdown
from relay.core.model import Delivery, Notification, kind_name, recipient_type_name
from relay.core.names import Lookup, names_of, resource_url
from relay.core.sandbox import make_environment

FORMATS = ("md", "html", "txt")
PLATFORM = "platform"
AUTO = "auto"
OPERATOR_LOOKUP_TTL = 2.0  # seconds an answer about the operator's template files is trusted
OPERATOR_LOOKUP_MAX = 10_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rendered:
    title: str
    body: str
    format: str  # "txt", "md" or "html": what `body` is written in
    template: str  # the template file used, or "platform"
    error: str | None = None  # why a template was not used, when it failed
    text: str | None = None  # plain-text alternative of an html body (e-mail); None: derive it from the HTML


def candidates(template: str, kind: str, recipient_types: list[str], fmt: str) -> list[str]:
    """Template files to try, most specific first (see docs/templates.md, "Lookup")."""
    if template == PLATFORM:
        return []
    if template != AUTO:
        return [f"{template}.{fmt}.j2"]
    kname = kind_name(kind)
    names = [f"{kname}/{recipient_type_name(t)}.{fmt}.j2" for t in recipient_types]
    names.append(f"{kname}/default.{fmt}.j2")
    return list(dict.fromkeys(names))


_parents: WeakKeyDictionary[Template, Template | None] = WeakKeyDictionary()


def parent_of(tpl: Template) -> Template | None:
    """The template `tpl` extends, when it names one literally (`{% extends "base.j2" %}`)."""
    if tpl in _parents:
        return _parents[tpl]
    env = tpl.environment
    parent: Template | None = None
    if env.loader is not None and tpl.name is not None:
        source = env.loader.get_source(env, tpl.name)[0]
        for node in env.parse(source).find_all(nodes.Extends):
            if isinstance(node.template, nodes.Const) and isinstance(node.template.value, str):
                parent = env.get_template(node.template.value)
                break
    _parents[tpl] = parent
    return parent


def find_block(tpl: Template, name: str) -> Callable[[Context], Iterator[str]] | None:
    """A block as the rendered template would use it: its own, else the nearest ancestor's."""
    seen: set[str | None] = set()
    current: Template | None = tpl
    while current is not None and current.name not in seen:
        if name in current.blocks:
            return current.blocks[name]
        seen.add(current.name)
        current = parent_of(current)
    return None


def _empty_block(context: Any) -> Iterator[str]:
    return iter(())


def render_template(
    tpl: Template, context: dict[str, Any], fmt: str, default_title: str = ""
) -> tuple[str | None, str]:
    """(the `title` block or None, the body without it, which sees it as `title`), under one set of limits."""
    with limited(RENDER_SECONDS):
        title: str | None = None
        title_block = find_block(tpl, "title")
        if title_block is not None:
            title = joined(title_block(tpl.new_context(context))).strip()
            if fmt == "html":
                title = html.unescape(title)
            elif fmt == "md":  # titles are plain text: its values' markdown escapes undone
                title = unescape_markdown(title)
            title = " ".join(title.split())
        shown = title if title is not None else context.get("title", default_title)
        ctx = tpl.new_context({**context, "title": shown})
        ctx.blocks["title"] = [_empty_block]
        body = joined(tpl.root_render_func(ctx)).strip()
    return title, body


def text_counterpart(name: str) -> str | None:
    """The `.txt.j2` template that gives an `.html.j2` template its plain-text part."""
    return name.removesuffix(".html.j2") + ".txt.j2" if name.endswith(".html.j2") else None


def recipient_of(notification: Notification, delivery: Delivery) -> dict[str, Any] | None:
    """The recipient object a per-recipient delivery is for, as the payload gives it (None: an audience)."""
    recipients = notification.messages[delivery.messageIndex].recipients
    index = delivery.recipientIndex
    return recipients[index] if index is not None and index < len(recipients) else None


def template_globals(config: Config) -> dict[str, Any]:
    """What every template of this config sees besides the notification: the platform's URL and its UI's."""
    api = (config.platform.url or "").rstrip("/")
    return {"platform_url": api, "platform_ui_url": (config.platform.ui_url or "").rstrip("/") or api}


def build_context(
    notification: Notification, delivery: Delivery, extra: dict[str, Any] | None = None, lookup: Lookup | None = None
) -> dict[str, Any]:
    """The template's context (docs/templates.md, "Context"); `lookup`: the catalog's names (relay.core.names)."""
    message = notification.messages[delivery.messageIndex]
    payload = notification.model_dump(mode="json")
    msg = payload["messages"][delivery.messageIndex]
    found = recipient_of(notification, delivery)
    recipient = dict(found) if found is not None else None  # a copy: the payload's stays as it came
    if recipient is not None and delivery.address:
        recipient.setdefault("email", delivery.address)
    context: dict[str, Any] = {
        "notification": payload,
        "kind": notification.kind,
        "kind_name": kind_name(notification.kind),
        "body": payload["body"],
        "metadata": payload["metadata"],
        "message": {**msg, "title": message.title or "", "message": message.message or ""},
        "recipient_type": delivery.recipientType,
        "recipients": msg.get("recipients", []),
        "recipient": recipient,
        "channel": delivery.channel,
        "platform_url": "",
        "platform_ui_url": "",
        "names": names_of(notification, lookup),
    }
    if extra:
        context.update(extra)
    base = context["platform_ui_url"] or context["platform_url"]
    context["resource_url"] = resource_url(base if isinstance(base, str) else None, payload["body"])
    return context


class Renderer:
    """Looks templates up and renders them; one per process, templates compiled once."""

    def __init__(
        self, template_dir: Path | None, extra_context: dict[str, Any] | None = None, shipped: bool = True
    ) -> None:
        self.env = make_environment(template_dir)
        # relay's own templates only, for what must not be replaced by an operator's file of the same name
        # (relay's own digest, after the operator's failed).
        self.builtin_env = make_environment(None)
        self.extra = extra_context or {}
        self.operator = FileSystemLoader(str(template_dir)) if template_dir is not None else None
        self._operator_files: dict[str, tuple[float, bool]] = {}
        # Without shipped templates (templates.builtin: false) only the operator's own are looked up;
        # the shipped layouts and bases stay available to them and to the platform's text.
        self.shipped = shipped

    def operator_has(self, name: str) -> bool:
        """A render asks this of a dozen names: answers are kept for OPERATOR_LOOKUP_TTL."""
        if self.operator is None:
            return False
        at = time.monotonic()
        known = self._operator_files.get(name)
        if known is not None and at - known[0] < OPERATOR_LOOKUP_TTL:
            return known[1]
        try:
            self.operator.get_source(self.env, name)
            found = True
        except TemplateNotFound:
            found = False
        if len(self._operator_files) >= OPERATOR_LOOKUP_MAX:  # kinds come from payloads: stay bounded
            self._operator_files.clear()
        self._operator_files[name] = (at, found)
        return found

    def find(self, names: list[str], shipped: bool | None = None) -> Template | None:
        """The first template of `names` that exists; any of the operator's beats any shipped one."""
        use_shipped = self.shipped if shipped is None else shipped
        ordered = [n for n in names if self.operator_has(n)] + (names if use_shipped else [])
        for name in ordered:
            try:
                return self.env.get_template(name)
            except TemplateNotFound:
                continue
        return None

    def render(
        self,
        notification: Notification,
        delivery: Delivery,
        fmt: str,
        extra: dict[str, Any] | None = None,
        lookup: Lookup | None = None,
    ) -> Rendered:
        """`extra`: more context (the person's links); `lookup`: names, asked only when a template is used."""
        message = notification.messages[delivery.messageIndex]
        types = [t for t in (message.recipientType_v2, delivery.recipientType, message.recipientType) if t]
        names = candidates(delivery.template, notification.kind, types, fmt)
        title, text = (message.title or "").strip(), (message.message or "").strip()  # the platform's own
        error: str | None = None
        tpl: Template | None = None
        try:
            tpl, used = self.choose(delivery.template, notification.kind, types, fmt)
            if tpl is not None:
                context = build_context(notification, delivery, {**self.extra, **(extra or {})}, lookup)
                t_title, body = render_template(tpl, context, used, title)
                t_title = t_title if t_title is not None else title
                text_part = self.text_part(tpl.name or "", context, t_title) if used == "html" else None
                return Rendered(t_title, body, used, tpl.name or "?", text=text_part)
            if delivery.template not in (AUTO, PLATFORM):
                error = f"template {names[0]} not found"
        except Exception as exc:  # any template failure: fall back, never lose the message
            where = tpl.name if tpl is not None else ", ".join(names)
            error = f"{where}: {type(exc).__name__}: {exc}"
        return self.platform(title, text, fmt, error, extra)

    def choose(self, template: str, kind: str, types: list[str], fmt: str) -> tuple[Template | None, str]:
        """The template and its format (html may take txt): the operator's first, then the shipped ones."""
        chains = [(candidates(template, kind, types, fmt), fmt)]
        if fmt == "html":
            chains.append((candidates(template, kind, types, "txt"), "txt"))
        for shipped in (False, True) if self.shipped else (False,):
            for names, written in chains:
                found = self.find(names, shipped=shipped)
                if found is not None:
                    return found, written
        return None, fmt

    def text_part(self, html_name: str, context: dict[str, Any], title: str) -> str | None:
        """The plain-text part from the html template's `.txt.j2` sibling; None to derive it from the HTML."""
        name = text_counterpart(html_name)
        if name is None:
            return None
        try:
            tpl = self.find([name])
            return render_template(tpl, context, "txt", title)[1] if tpl is not None else None
        except Exception as exc:  # the HTML part is fine; only the text part is derived instead
            log.warning("text part template failed, derived from the HTML instead: %s: %s", name, exc)
            return None

    def platform(
        self, title: str, text: str, fmt: str, error: str | None, extra: dict[str, Any] | None = None
    ) -> Rendered:
        """The platform's text verbatim; HTML channels get it escaped inside a layout (links in its footer)."""
        if fmt == "html":
            layout = self.find(["_layouts/platform.html.j2"], shipped=True)
            if layout is not None:
                try:
                    links = {k: v for k, v in (extra or {}).items() if k in ("preferences_url", "unsubscribe_url")}
                    _, body = render_template(layout, {"title": title, "text": text, **links}, "html")
                    return Rendered(title, body, "html", PLATFORM, error, text=text)
                except Exception as exc:  # the layout is ours; still never lose the message
                    error = error or f"layout: {exc}"
        return Rendered(title, text, "txt", PLATFORM, error)
