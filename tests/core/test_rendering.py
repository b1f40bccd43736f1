"""relay.core.rendering: template lookup, title blocks, escaping, the sandbox, and the platform-text fallback."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from relay.core.markdown import escape_markdown
from relay.core.model import Delivery, Notification
from relay.core.rendering import PLATFORM, Renderer, candidates

pytestmark = pytest.mark.dated

# A kind relay ships no templates for, so that only the test's own templates are in play.
KIND = "notification:unit-test-kind"
KNAME = "unit-test-kind"
SHIPPED_KIND = "notification:access-control-request-failed"
SHIPPED = "access-control-request-failed"
OWNER = "recipient-type:system-owner"
MANAGER = "recipient-type:project-data-access-manager"
TITLE = "Access request failed"
TEXT = "The access request by Alice Rossi to Invoices failed."


def notification(
    body: dict[str, Any] | None = None,
    legacy: str | None = OWNER,
    v2: str | None = OWNER,
    title: str | None = TITLE,
    text: str | None = TEXT,
    recipients: list[dict[str, Any]] | None = None,
    kind: str = KIND,
    **extra: Any,
) -> Notification:
    return Notification.model_validate(
        {
            "kind": kind,
            "sender": "platform",
            "body": body if body is not None else {"requester": {"displayName": "Alice Rossi"}, "verb": "grant"},
            "messages": [
                {
                    "recipientType": legacy,
                    "recipientType_v2": v2,
                    "recipients": recipients or [],
                    "title": title,
                    "message": text,
                }
            ],
            "metadata": {"eventId": "evt-42", "createdAt": "2026-11-20T09:14:05Z"},
            **extra,
        }
    )


def delivery(rtype: str | None = OWNER, template: str = "auto", **fields: Any) -> Delivery:
    return Delivery("d1", "evt-42", KIND, 0, "chan", template, 3, 0.0, 0.0, recipientType=rtype, **fields)


@pytest.fixture
def tdir(tmp_path: Path) -> Path:
    d = tmp_path / "templates"
    d.mkdir()
    return d


def write(tdir: Path, name: str, text: str) -> None:
    path = tdir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# --- candidates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "kind", "types", "fmt", "expected"),
    [
        ("auto", KIND, [OWNER], "md", [f"{KNAME}/system-owner.md.j2", f"{KNAME}/default.md.j2"]),
        (
            "auto",
            KIND,
            [MANAGER, OWNER],
            "html",
            [
                f"{KNAME}/project-data-access-manager.html.j2",
                f"{KNAME}/system-owner.html.j2",
                f"{KNAME}/default.html.j2",
            ],
        ),
        ("auto", KIND, [OWNER, OWNER], "txt", [f"{KNAME}/system-owner.txt.j2", f"{KNAME}/default.txt.j2"]),
        ("auto", KIND, [], "md", [f"{KNAME}/default.md.j2"]),
        ("auto", "custom-kind", ["plain-type"], "md", ["custom-kind/plain-type.md.j2", "custom-kind/default.md.j2"]),
        ("platform", KIND, [OWNER], "md", []),
        ("shared/owner", KIND, [OWNER], "html", ["shared/owner.html.j2"]),
    ],
)
def test_candidates(template: str, kind: str, types: list[str], fmt: str, expected: list[str]) -> None:
    assert candidates(template, kind, types, fmt) == expected


# --- lookup chain -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "legacy", "v2", "rtype", "fmt", "expected_body", "expected_template"),
    [
        # Recipient-type file first, then default.
        (
            {"system-owner.md.j2": "owner", "default.md.j2": "dflt"},
            OWNER,
            OWNER,
            OWNER,
            "md",
            "owner",
            f"{KNAME}/system-owner.md.j2",
        ),
        ({"default.md.j2": "dflt"}, OWNER, OWNER, OWNER, "md", "dflt", f"{KNAME}/default.md.j2"),
        (
            {"other-type.md.j2": "other", "default.md.j2": "dflt"},
            OWNER,
            OWNER,
            OWNER,
            "md",
            "dflt",
            f"{KNAME}/default.md.j2",
        ),
        # v2's file before the legacy one.
        (
            {"system-owner.md.j2": "owner", "project-data-access-manager.md.j2": "mgr"},
            OWNER,
            MANAGER,
            MANAGER,
            "md",
            "mgr",
            f"{KNAME}/project-data-access-manager.md.j2",
        ),
        # The resolved type (legacy, when v2 was not routed) still finds the legacy file.
        ({"system-owner.md.j2": "owner"}, OWNER, MANAGER, OWNER, "md", "owner", f"{KNAME}/system-owner.md.j2"),
        # Each format has its own files.
        (
            {"default.md.j2": "md", "default.txt.j2": "txt"},
            OWNER,
            OWNER,
            OWNER,
            "txt",
            "txt",
            f"{KNAME}/default.txt.j2",
        ),
        (
            {"system-owner.html.j2": "<p>html</p>", "default.md.j2": "md"},
            OWNER,
            OWNER,
            OWNER,
            "html",
            "<p>html</p>",
            f"{KNAME}/system-owner.html.j2",
        ),
        # No file for the format: the platform's text.
        ({"default.md.j2": "md"}, OWNER, OWNER, OWNER, "txt", TEXT, PLATFORM),
        ({}, OWNER, OWNER, OWNER, "md", TEXT, PLATFORM),
        # No recipient type at all: default.
        ({"default.md.j2": "dflt"}, None, None, None, "md", "dflt", f"{KNAME}/default.md.j2"),
    ],
)
def test_lookup_chain(
    tdir: Path,
    files: dict[str, str],
    legacy: str | None,
    v2: str | None,
    rtype: str | None,
    fmt: str,
    expected_body: str,
    expected_template: str,
) -> None:
    for name, text in files.items():
        write(tdir, f"{KNAME}/{name}", text)
    out = Renderer(tdir).render(notification(legacy=legacy, v2=v2), delivery(rtype), fmt)
    assert out.body == expected_body
    assert out.template == expected_template
    assert out.error is None


def test_templates_of_another_kind_are_not_used(tdir: Path) -> None:
    write(tdir, "other-kind/default.md.j2", "wrong")
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert (out.body, out.template) == (TEXT, PLATFORM)


def test_unknown_kind_without_templates_uses_platform_text(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.md.j2", "known kind")
    out = Renderer(tdir).render(notification(kind="notification:brand-new"), delivery(), "md")
    assert (out.title, out.body, out.template, out.error) == (TITLE, TEXT, PLATFORM, None)


@pytest.mark.parametrize(
    ("kind", "rtype"),
    [("notification:../outside", OWNER), (KIND, "recipient-type:../../outside/default")],
)
def test_lookup_cannot_leave_the_templates_dir(tmp_path: Path, tdir: Path, kind: str, rtype: str) -> None:
    write(tmp_path, "outside/default.md.j2", "ESCAPED")
    write(tmp_path, "outside.md.j2", "ESCAPED")
    out = Renderer(tdir).render(notification(kind=kind, legacy=rtype, v2=rtype), delivery(rtype), "md")
    assert "ESCAPED" not in out.body
    assert out.template == PLATFORM


@pytest.mark.parametrize("fmt", ["md", "txt", "html"])
def test_template_platform_always_uses_platform_text(tdir: Path, fmt: str) -> None:
    for f in ("md", "txt", "html"):
        write(tdir, f"{KNAME}/system-owner.{f}.j2", "TEMPLATE")
        write(tdir, f"{KNAME}/default.{f}.j2", "TEMPLATE")
    out = Renderer(tdir).render(notification(), delivery(template="platform"), fmt)
    assert out.template == PLATFORM
    assert out.error is None
    assert out.title == TITLE
    assert "TEMPLATE" not in out.body
    assert TEXT in out.body


def test_named_template(tdir: Path) -> None:
    write(tdir, "shared/owner.md.j2", "{% block title %}Named{% endblock %}named {{ kind }}")
    write(tdir, f"{KNAME}/default.md.j2", "auto")
    out = Renderer(tdir).render(notification(), delivery(template="shared/owner"), "md")
    assert (out.title, out.body, out.template) == ("Named", f"named {KIND}", "shared/owner.md.j2")


def test_missing_named_template_falls_back_with_error(tdir: Path) -> None:
    out = Renderer(tdir).render(notification(), delivery(template="shared/missing"), "md")
    assert (out.title, out.body, out.template) == (TITLE, TEXT, PLATFORM)
    assert out.error is not None
    assert "shared/missing.md.j2" in out.error


def test_renderer_without_template_dir() -> None:
    out = Renderer(None).render(notification(), delivery(), "md")
    assert (out.title, out.body, out.format, out.template, out.error) == (TITLE, TEXT, "txt", PLATFORM, None)


# --- templates shipped with relay -----------------------------------------------------------------


@pytest.mark.parametrize("rtype", [OWNER, MANAGER, "recipient-type:access-control-requester", "recipient-type:new"])
@pytest.mark.parametrize("fmt", ["md", "txt", "html"])
def test_shipped_templates_render_without_error(tdir: Path, rtype: str, fmt: str) -> None:
    out = Renderer(tdir).render(notification(kind=SHIPPED_KIND, legacy=rtype, v2=rtype), delivery(rtype), fmt)
    assert out.error is None
    assert out.template.startswith(f"{SHIPPED}/")
    assert out.format == fmt
    assert out.title
    assert "Alice Rossi" in out.body


def test_operator_template_overrides_shipped_one_of_the_same_name(tdir: Path) -> None:
    write(tdir, f"{SHIPPED}/system-owner.md.j2", "{% block title %}Mine{% endblock %}operator's own")
    out = Renderer(tdir).render(notification(kind=SHIPPED_KIND), delivery(), "md")
    assert (out.title, out.body, out.template) == ("Mine", "operator's own", f"{SHIPPED}/system-owner.md.j2")


def test_operator_default_template_beats_shipped_type_templates(tdir: Path) -> None:
    write(tdir, f"{SHIPPED}/default.md.j2", "operator's default")
    out = Renderer(tdir).render(notification(kind=SHIPPED_KIND), delivery(), "md")
    assert out.body == "operator's default"


# --- plain-text part of html e-mail -------------------------------------------------------------


def test_html_template_takes_text_part_from_txt_sibling(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.html.j2", "{% block title %}T{% endblock %}<p>{{ body.verb }}</p>")
    write(tdir, f"{KNAME}/default.txt.j2", "text: {{ body.verb }}")
    out = Renderer(tdir).render(notification(), delivery(), "html")
    assert (out.title, out.body, out.text) == ("T", "<p>grant</p>", "text: grant")


@pytest.mark.parametrize("sibling", [None, "{{ no_such_variable }}"])
def test_html_template_without_usable_txt_sibling_leaves_text_to_derive(tdir: Path, sibling: str | None) -> None:
    write(tdir, f"{KNAME}/default.html.j2", "<p>{{ body.verb }}</p>")
    if sibling is not None:
        write(tdir, f"{KNAME}/default.txt.j2", sibling)
    out = Renderer(tdir).render(notification(), delivery(), "html")
    assert (out.body, out.template, out.error, out.text) == ("<p>grant</p>", f"{KNAME}/default.html.j2", None, None)


# --- title block --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "fmt", "title", "body"),
    [
        (
            "{% block title %}Hi {{ body.requester.displayName }}{% endblock %}Body text",
            "md",
            "Hi Alice Rossi",
            "Body text",
        ),
        ("Before\n{% block title %}T1{% endblock %}\nAfter", "txt", "T1", "Before\nAfter"),
        ("{% block title %}\n  Multi\n  line   title\n{% endblock %}\nbody", "md", "Multi line title", "body"),
        ("No title block: {{ message.title }}", "md", TITLE, f"No title block: {TITLE}"),
        ("{% block title %}<b>{{ body.verb }}</b>{% endblock %}<p>x</p>", "html", "<b>grant</b>", "<p>x</p>"),
    ],
)
def test_title_block_sets_title_and_is_not_in_body(tdir: Path, source: str, fmt: str, title: str, body: str) -> None:
    write(tdir, f"{KNAME}/default.{fmt}.j2", source)
    out = Renderer(tdir).render(notification(), delivery(), fmt)
    assert out.error is None
    assert out.title == title
    assert out.body == body
    assert out.format == fmt


def test_inherited_title_block_sets_title(tdir: Path) -> None:
    base = "{% block title %}Base: {{ body.verb }}{% endblock %}\nBODY {% block content %}{% endblock %}"
    write(tdir, "base.md.j2", base)
    write(tdir, f"{KNAME}/default.md.j2", '{% extends "base.md.j2" %}{% block content %}child{% endblock %}')
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert out.body == "BODY child"
    assert out.title == "Base: grant"


def test_overridden_title_block_in_child_template(tdir: Path) -> None:
    write(tdir, "base.md.j2", "{% block title %}Base{% endblock %}\nBODY {% block content %}{% endblock %}")
    write(
        tdir,
        f"{KNAME}/default.md.j2",
        '{% extends "base.md.j2" %}{% block title %}Child {{ body.verb }}{% endblock %}'
        "{% block content %}child{% endblock %}",
    )
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert (out.title, out.body) == ("Child grant", "BODY child")


# --- escaping and payload values as data ---------------------------------------------------------

HOSTILE_NAME = "<script>alert('x')</script> & \"Bob\""


@pytest.mark.parametrize(
    ("fmt", "expected_body"),
    [
        ("html", "<p>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#34;Bob&#34;</p>"),
        ("md", "<p>\\<script\\>alert\\('x'\\)\\</script\\> & \"Bob\"</p>"),  # escaped for chat markdown
        ("txt", f"<p>{HOSTILE_NAME}</p>"),
    ],
)
def test_payload_values_are_escaped_in_html_and_md_only(tdir: Path, fmt: str, expected_body: str) -> None:
    write(tdir, f"{KNAME}/default.{fmt}.j2", "<p>{{ body.requester.displayName }}</p>")
    out = Renderer(tdir).render(notification(body={"requester": {"displayName": HOSTILE_NAME}}), delivery(), fmt)
    assert out.error is None
    assert out.body == expected_body


EVE = "<!channel> Eve <https://evil.example|re-login here>"
EVE_MD = "\\<!channel\\> Eve \\<https://evil.example|re-login here\\>"


def test_md_values_are_escaped_once_through_blocks_macros_and_partials(tdir: Path) -> None:
    """What a `{% set %}` block, a macro or an included `.md.j2` partial outputs is not escaped again; the
    operator's own markdown in them stays markdown."""
    write(tdir, "_macros.md.j2", "{% macro row(label, value) %}- **{{ label }}:** {{ value }}{% endmacro %}")
    write(tdir, "_part.md.j2", "[{{ body.name }}](https://docs.example/x_(y))")
    write(
        tdir,
        f"{KNAME}/default.md.j2",
        '{% import "_macros.md.j2" as m %}{% set intro %}Hi **{{ body.name }}** <3{% endset %}'
        '{{ intro|trim }}\n{{ m.row("Who", body.name) }}\n{% include "_part.md.j2" %}',
    )
    out = Renderer(tdir).render(notification(body={"name": EVE}), delivery(), "md")
    assert out.error is None
    assert out.body == f"Hi **{EVE_MD}** <3\n- **Who:** {EVE_MD}\n[{EVE_MD}](https://docs.example/x_(y))"


def test_safe_lets_an_operator_put_a_value_in_as_markdown(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.md.j2", "{{ body.note|safe }} / {{ body.note }}")
    out = Renderer(tdir).render(notification(body={"note": "see [docs](https://docs.example)"}), delivery(), "md")
    assert out.body == "see [docs](https://docs.example) / see \\[docs\\]\\(https://docs.example\\)"


def test_a_partial_not_named_md_is_not_escaped(tdir: Path) -> None:
    """Escaping follows the file's name, as Jinja's HTML autoescape does: `x.j2` writes no known format."""
    write(tdir, "_part.j2", "{{ body.name }}")
    write(tdir, f"{KNAME}/default.md.j2", '{% include "_part.j2" %} {{ body.name }}')
    out = Renderer(tdir).render(notification(body={"name": "<b>"}), delivery(), "md")
    assert out.body == "<b> \\<b\\>"


def test_md_titles_are_plain_text(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.md.j2", "{% block title %}For {{ body.name }} \\o/{% endblock %}x")
    out = Renderer(tdir).render(notification(body={"name": EVE + " a\\*b \\"}), delivery(), "md")
    assert out.title == f"For {EVE} a\\*b \\ \\o/"


@pytest.mark.parametrize("fmt", ["html", "md", "txt"])
def test_titles_are_never_html_escaped(tdir: Path, fmt: str) -> None:
    write(tdir, f"{KNAME}/default.{fmt}.j2", "{% block title %}{{ body.name }}{% endblock %}x")
    out = Renderer(tdir).render(notification(body={"name": "R&D <team> \"ops\" 'q'"}), delivery(), fmt)
    assert out.title == "R&D <team> \"ops\" 'q'"


@pytest.mark.parametrize(
    "payload_value",
    ["{{ 7*7 }}", "{% for i in range(3) %}x{% endfor %}", "{{ ''.__class__ }}", "{# c #}", "${HOME}"],
)
@pytest.mark.parametrize("fmt", ["md", "txt"])
def test_payload_values_are_never_evaluated(tdir: Path, payload_value: str, fmt: str) -> None:
    write(tdir, f"{KNAME}/default.{fmt}.j2", "{% block title %}{{ body.t }}{% endblock %}[{{ body.v }}]")
    out = Renderer(tdir).render(notification(body={"t": payload_value, "v": payload_value}), delivery(), fmt)
    assert out.error is None
    assert out.body == f"[{escape_markdown(payload_value) if fmt == 'md' else payload_value}]"
    assert out.title == payload_value
    assert "49" not in out.body


def test_payload_template_syntax_stays_literal_in_platform_text(tdir: Path) -> None:
    n = notification(title="{{ 7*7 }} title", text="{{ 7*7 }} {% if true %}yes{% endif %}")
    for fmt in ("md", "txt"):
        out = Renderer(tdir).render(n, delivery(), fmt)
        assert (out.title, out.body) == ("{{ 7*7 }} title", "{{ 7*7 }} {% if true %}yes{% endif %}")
    html_out = Renderer(tdir).render(n, delivery(), "html")
    assert html_out.title == "{{ 7*7 }} title"
    assert "{{ 7*7 }} {% if true %}yes{% endif %}" in html_out.body
    assert "49" not in html_out.body


def test_payload_template_syntax_stays_literal_in_html_template(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.html.j2", "<p>{{ body.v }}</p>")
    out = Renderer(tdir).render(notification(body={"v": "{{ 7*7 }}"}), delivery(), "html")
    assert out.body == "<p>{{ 7*7 }}</p>"


# --- sandbox and limits: a failing template falls back to the platform's text ---------------------


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{ ''.__class__.__mro__ }}", "SecurityError"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "SecurityError"),
        ("{{ cycler.__init__.__globals__ }}", "SecurityError"),
        ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "SecurityError"),
        ("{{ joiner.__init__.__globals__ }}", "SecurityError"),
        ("{{ namespace.__init__.__globals__ }}", "SecurityError"),
        ("{{ lipsum.__globals__ }}", "SecurityError"),
        ("{{ body.__class__ }}", "SecurityError"),
        ("{{ self.__init__.__globals__ }}", "SecurityError"),
        ("{{ body|attr('__class__') }}", "SecurityError"),
        ("{{ ''|attr('\\x5f\\x5fclass\\x5f\\x5f') }}", "SecurityError"),
        ("{{ body.update({'x': 1}) }}", "SecurityError"),
        ("{{ recipients.append(1) }}", "SecurityError"),
        ("{{ 'x' * 10**9 }}", "sequence repetition too large"),
        ("{{ [1] * 10**9 }}", "sequence repetition too large"),
        ("{{ 10**9 * 'x' }}", "sequence repetition too large"),
        ("{{ 2 ** 1000 }}", "exponent too large"),
        ("{{ 9 ** (10 ** 6) }}", "exponent too large"),
        ("{{ range(10**9)|list|length }}", "Range too big"),
        ("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "output of more than"),
        ("{{ body.no_such_field }}", "UndefinedError"),
        ("{{ no_such_variable }}", "UndefinedError"),
        ("{{ body.requester.displayName.nope }}", "UndefinedError"),
        ("{{ message.title|no_such_filter }}", "No filter named"),
        ("{% if %}", "TemplateSyntaxError"),
    ],
)
@pytest.mark.parametrize("fmt", ["md", "html"])
def test_failing_template_falls_back_to_platform_text(tdir: Path, source: str, reason: str, fmt: str) -> None:
    write(tdir, f"{KNAME}/default.{fmt}.j2", "{% block title %}TEMPLATE TITLE{% endblock %}" + source)
    out = Renderer(tdir).render(notification(), delivery(), fmt)
    assert out.template == PLATFORM
    assert out.title == TITLE
    assert TEXT in out.body
    assert out.error is not None
    assert f"{KNAME}/default.{fmt}.j2" in out.error
    assert reason in out.error
    assert "TEMPLATE TITLE" not in out.body


def test_failure_in_title_block_falls_back(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.md.j2", "{% block title %}{{ nope }}{% endblock %}ok")
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert (out.title, out.body, out.template) == (TITLE, TEXT, PLATFORM)
    assert out.error is not None and "nope" in out.error


def test_strict_undefined_error_names_the_variable(tdir: Path) -> None:
    write(tdir, f"{KNAME}/default.md.j2", "{{ body.missing_field }}")
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert out.error is not None
    assert "UndefinedError" in out.error
    assert "missing_field" in out.error


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'ab' * 1000 }}",
        "{{ 2 ** 10 }}",
        "{{ 3 * 4 }}",
        "{{ ([0] * 50)|length }}",
        "{% for i in range(1000) %}.{% endfor %}",
        "{{ body.requester.displayName|upper }}",
        "{{ body.get('verb') }}",
        "{{ body['requester']['displayName'] }}",
    ],
)
def test_ordinary_template_code_still_works(tdir: Path, source: str) -> None:
    write(tdir, f"{KNAME}/default.md.j2", source)
    out = Renderer(tdir).render(notification(), delivery(), "md")
    assert out.error is None
    assert out.template == f"{KNAME}/default.md.j2"
    assert out.body != TEXT


# --- context ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("{{ kind }}", KIND),
        ("{{ kind_name }}", KNAME),
        ("{{ body.verb }}", "grant"),
        ("{{ metadata.eventId }}", "evt-42"),
        ("{{ notification.sender }}", "platform"),
        ("{{ notification.extraField }}", "kept"),
        ("{{ message.title }}", TITLE),
        ("{{ message.message }}", TEXT),
        ("{{ message.recipientType_v2 }}", MANAGER),
        ("{{ recipient_type }}", MANAGER),
        ("{{ recipients|length }}", "2"),
        ("{{ recipients[0]['spec.email'] }}", "a@x.com"),
        ("{{ channel }}", "chan"),
        ("{{ recipient is none }}", "True"),
        ("{{ org }}", "ACME"),
    ],
)
def test_context(tdir: Path, expression: str, expected: str) -> None:
    write(tdir, f"{KNAME}/default.txt.j2", expression)
    n = notification(
        v2=MANAGER,
        recipients=[{"userRef": "user:default/a", "spec.email": "a@x.com"}, {"userRef": None}],
        extraField="kept",
    )
    out = Renderer(tdir, extra_context={"org": "ACME"}).render(n, delivery(MANAGER), "txt")
    assert out.error is None
    assert out.body == expected


@pytest.mark.parametrize(
    ("rcpt", "address", "expression", "expected"),
    [
        (
            {"userRef": "user:default/a", "spec.email": "a@x.com"},
            "a@x.com",
            "{{ recipient.userRef }}",
            "user:default/a",
        ),
        ({"userRef": "user:default/a", "spec": {"email": "a@x.com"}}, "a@x.com", "{{ recipient.email }}", "a@x.com"),
        ({"userRef": None, "email": "own@x.com"}, "own@x.com", "{{ recipient.email }}", "own@x.com"),
        ({"userRef": None, "spec.email": "a@x.com"}, "a@x.com", "{{ recipient.userRef is none }}", "True"),
    ],
)
def test_recipient_context(tdir: Path, rcpt: dict[str, Any], address: str, expression: str, expected: str) -> None:
    write(tdir, f"{KNAME}/default.txt.j2", expression)
    d = delivery(address=address, recipientIndex=0)
    n = notification(recipients=[copy.deepcopy(rcpt)])
    out = Renderer(tdir).render(n, d, "txt")
    assert out.error is None
    assert out.body == expected
    # The payload's recipient is not modified by rendering.
    assert n.messages[0].recipients[0] == rcpt


# --- platform text --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["md", "txt"])
def test_platform_text_is_verbatim_for_text_formats(tdir: Path, fmt: str) -> None:
    text = "Line 1 with *stars* and <tags> & _under_\nLine 2: {{ 7*7 }}"
    out = Renderer(tdir).render(notification(title="T <&>", text=text), delivery(), fmt)
    assert (out.title, out.body, out.format, out.template, out.error) == ("T <&>", text, "txt", PLATFORM, None)


def test_platform_text_in_html_is_wrapped_and_escaped(tdir: Path) -> None:
    text = "<script>alert(1)</script> & more"
    out = Renderer(tdir).render(notification(title="R&D <x>", text=text), delivery(), "html")
    assert out.format == "html"
    assert out.template == PLATFORM
    assert out.title == "R&D <x>"
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in out.body
    assert "<script>" not in out.body
    assert "R&amp;D &lt;x&gt;" in out.body
    assert out.body.lstrip().lower().startswith("<!doctype html>")


@pytest.mark.parametrize(("title", "text"), [(None, None), ("", ""), ("  T  ", "\n body \n")])
def test_platform_text_with_missing_or_padded_values(tdir: Path, title: str | None, text: str | None) -> None:
    out = Renderer(tdir).render(notification(title=title, text=text), delivery(), "txt")
    assert out.title == (title or "").strip()
    assert out.body == (text or "").strip()
    assert out.error is None


def test_email_without_html_template_uses_the_txt_one(tmp_path: Path) -> None:
    kind_dir = tmp_path / "brand-new"
    kind_dir.mkdir()
    (kind_dir / "default.txt.j2").write_text(
        "{% block title %}Plain {{ kind_name }}{% endblock %}Text <b>{{ message.message }}</b>"
    )
    out = Renderer(tmp_path, shipped=False).render(notification(kind="notification:brand-new"), delivery(), "html")
    assert out.format == "txt" and out.template == "brand-new/default.txt.j2"
    assert out.title == "Plain brand-new"
    assert out.body.startswith("Text <b>") and out.text is None


def test_a_template_file_added_later_is_used_once_the_lookup_cache_expires(
    tdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relay.core.rendering as rendering

    renderer = Renderer(tdir, shipped=False)  # relay's default, templates.builtin: false
    assert renderer.render(notification(), delivery(), "md").template == PLATFORM
    write(tdir, f"{KNAME}/default.md.j2", "added")
    # Within the TTL the earlier answer stands (no file-system look-up per render) ...
    assert renderer.render(notification(), delivery(), "md").template == PLATFORM
    # ... and once it has passed, the new file is found.
    monkeypatch.setattr(rendering, "OPERATOR_LOOKUP_TTL", 0.0)
    out = renderer.render(notification(), delivery(), "md")
    assert (out.body, out.template) == ("added", f"{KNAME}/default.md.j2")
