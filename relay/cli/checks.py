"""`relay check`: everything that can be wrong before a notification arrives, found at once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, TemplateNotFound, TemplateSyntaxError

from relay.config import Config
from relay.config.server import is_loopback
from relay.config.time_intervals import HORIZON
from relay.core.clock import Clock, system_clock
from relay.core.quiet import held_until
from relay.core.recipients import REPORTED_AS
from relay.core.redaction import EMAIL_SCHEMES
from relay.core.rendering import AUTO, FORMATS, PLATFORM
from relay.core.routing import route_label, route_names
from relay.core.sandbox import BUILTIN_DIR, make_environment
from relay.delivery.channels import channel_format, check_url, describe_url, native_url
from relay.digests.model import human_duration
from relay.threads.model import threads_on, unthreaded_why


def check_templates(config: Config) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    env = make_environment(config.templates_path)
    shipped = config.templates.builtin
    for root in (config.templates_path, BUILTIN_DIR):
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*.j2"))  # none in a missing directory
        if root == BUILTIN_DIR and not shipped:
            # relay's own layouts and digest templates (`_layouts/`, `_digest/`): used with templates.builtin off too
            names = [n for n in names if n.startswith("_")]
        for name in names:
            try:
                source = (root / name).read_text(encoding="utf-8")
                env.parse(source, name, str(root / name))
            except TemplateSyntaxError as exc:
                problems.append(f"template {root / name}, line {exc.lineno}: {exc.message}")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"template {root / name}: cannot read: {exc}")
        if root != BUILTIN_DIR and names:
            notes.append(f"{len(names)} template(s) compiled in {root}")
        elif root == BUILTIN_DIR and shipped:
            notes.append(f"{len(names)} built-in template(s) compiled in {root} (templates.builtin: true)")
        elif root == BUILTIN_DIR:
            notes.append(
                "templates.builtin is false: relay's built-in per-kind templates are not used (a kind with no "
                f"template of yours gets the platform's text); its {len(names)} layout and digest template(s) compiled"
            )
    if not config.templates_path.is_dir():
        uses = "only built-in templates are used" if shipped else "messages carry the platform's own text"
        notes.append(f"templates.dir {config.templates_path} does not exist: {uses}")
    routes = [(f"routes[{i}]", r.template) for i, r in enumerate(config.routes)] + [
        ("default", config.default.template)
    ]
    for where, template in routes:
        if template in (AUTO, PLATFORM):
            continue
        if not any(_exists(env, f"{template}.{fmt}.j2") for fmt in FORMATS):
            problems.append(f"{where}.template: no template {template!r} ({template}.<md|html|txt>.j2)")
    return problems, notes


def _exists(env: Environment, name: str) -> bool:
    try:
        env.get_template(name)
        return True
    except TemplateNotFound:
        return False
    except TemplateSyntaxError:
        return True


def shown_target(url: str, fmt: str) -> str:
    """The URL a send really uses, secrets scrubbed: `relay check` and `relay preview` show the same one."""
    return describe_url(native_url(url, fmt))


def check_channels(config: Config) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes: list[str] = []
    for name, channel in config.channels.items():
        reason = check_url(channel.url)
        if reason:
            problems.append(f"channels.{name}.url: {reason}")
        else:
            notes.append(f"channel {name}: {shown_target(channel.url, channel_format(channel.url, channel.format))}")
    used = {c for r in config.routes for c in (*r.channels, *r.fallback)} | set(config.default.channels)
    for name in sorted(set(config.channels) - used):
        notes.append(f"channel {name} is not used by any route")
    return problems, notes


def channel_url_problems(data: dict[str, Any]) -> list[str]:
    """The channel URLs of a config that did not validate (`data` as read), checked all the same."""
    channels = data.get("channels")
    if not isinstance(channels, dict):
        return []
    problems = []
    for name, channel in channels.items():
        url = channel.get("url") if isinstance(channel, dict) else None
        reason = check_url(url) if isinstance(url, str) else None
        if reason:
            problems.append(f"channels.{name}.url: {reason}")
    return problems


def check_fallbacks(config: Config) -> list[str]:
    """A v2 type that no route names falls back on its legacy type's routes: a shared channel there gets both
    messages of a notification, the legacy type's own and the v2 type's (often the same text twice)."""
    warnings = []
    for v2, legacy in REPORTED_AS.items():
        for i, route in enumerate(config.routes):
            shared = [c for c in route.channels if c in config.channels and not config.channels[c].per_recipient]
            kinds = [k for k in route.kinds if route_names(route, k, legacy)]
            if shared and any(not any(route_names(r, k, v2) for r in config.routes) for k in kinds):
                warnings.append(
                    f"{route_label(config, i)} sends {legacy} to {', '.join(shared)}: no route names {v2},"
                    f" which the platform also reports as {legacy}, so its message goes there too (two posts a"
                    f" notification); route {v2}"
                )
    return warnings


def check_intervals(
    config: Config, now: datetime | None = None, clock: Clock = system_clock
) -> tuple[list[str], list[str]]:
    """Warnings for intervals that never open (within four years); notes of when each route would send now, and
    of what each digest gathers."""
    at = now or datetime.fromtimestamp(clock(), UTC)  # the runtime's clock: "now" is relay's
    warnings, notes = [], []
    for i, route in enumerate(config.routes):
        where = route_label(config, i)
        if route.digest is not None:
            notes.append(
                f"{where}: gathers its deliveries to each channel (each address, on a per-recipient channel) for"
                f" {human_duration(route.digest.window)}, at most {route.digest.max_items} a message"
            )
        if not (route.active_time_intervals or route.mute_time_intervals):
            continue
        until = held_until(config, where, at)
        if until is None:
            notes.append(f"{where}: its time intervals let deliveries go now")
        elif until >= at + HORIZON:
            warnings.append(
                f"{where}: its time intervals never let a delivery go: each one would be held until it expires"
            )
        else:
            notes.append(f"{where}: a delivery planned now is held until {until.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return warnings, notes


def check_all(config: Config, clock: Clock = system_clock) -> tuple[list[str], list[str], list[str]]:
    """Problems (it cannot work), warnings (likely not as meant) and notes, as of now on `clock`."""
    problems, notes = check_channels(config)
    t_problems, t_notes = check_templates(config)
    warnings = []
    if not config.routes and not config.default.channels:
        warnings.append("no routes and no default channels: notifications are accepted but sent nowhere")
    host = config.server.host
    for weak in config.server.weak_credentials():
        where = "fine on loopback only" if is_loopback(host) else f"`relay serve` and `relay api` refuse it on {host}"
        warnings.append(f"{weak}: it could be guessed ({where}); `relay token` prints a strong one")
    i_warnings, i_notes = check_intervals(config, clock=clock)
    warnings += check_fallbacks(config)
    return problems + t_problems + _threads(config, warnings), warnings + i_warnings, notes + t_notes + i_notes


def _threads(config: Config, warnings: list[str]) -> list[str]:
    """Problems of threaded routes (a key that does not compile); a Slack channel that cannot thread warns."""
    problems, env = [], make_environment(None)
    for i, route in enumerate(config.routes):
        where = route_label(config, i)
        try:
            env.parse(route.thread or "")
        except TemplateSyntaxError as exc:
            problems.append(f"{where}.thread: {exc}")
        for c in [c for c in route.channels if route.thread] if route.digest is None else []:
            channel = config.channels[c]
            scheme = channel.url.split(":", 1)[0].lower()
            if scheme in ("slack", *EMAIL_SCHEMES) and threads_on(channel.url, channel.format) is None:
                warnings.append(f"{where}: channel {c}: {unthreaded_why(channel.url)}")
        if route.thread and route.digest is not None:
            warnings.append(f"{where}: a digest is one message of its own: `thread` threads nothing on this route")
    return problems
