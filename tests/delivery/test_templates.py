"""Shipped templates (golden files), the lookup chain, and payload values as data.

Regenerate the golden files after an intended change: RELAY_REGEN_GOLDEN=1 pytest tests/delivery/test_templates.py
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from relay.cli.checks import check_templates
from relay.config import Config
from relay.core.model import Delivery, Notification
from relay.core.rendering import Rendered, Renderer
from relay.core.sandbox import BUILTIN_DIR
from tests.conftest import sample_notification

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
KIND = "access-control-request-failed"
PLATFORM_URL = "https://platform.example.com"
# message index in the sample -> recipient type name it is addressed to
MESSAGES = {0: "system-owner", 1: "access-control-requester", 2: "project-data-access-manager"}


def delivery(index: int, rtype: str, template: str = "auto") -> Delivery:
    return Delivery("d1", "e1", f"notification:{KIND}", index, "test", template, 3, 0.0, 0.0, rtype)


def render(
    data: dict[str, Any], fmt: str, index: int = 0, template: str = "auto", tdir: Path | None = None
) -> Rendered:
    notification = Notification.model_validate(data)
    message = notification.messages[index]
    rtype = message.recipientType_v2 or message.recipientType or ""
    renderer = Renderer(tdir, {"platform_url": PLATFORM_URL})
    return renderer.render(notification, delivery(index, rtype, template), fmt)


def as_golden(out: Rendered) -> str:
    text = f"template: {out.template}\nformat: {out.format}\ntitle: {out.title}\n--- body\n{out.body}\n"
    if out.text is not None:
        text += f"--- text part\n{out.text}\n"
    return text


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RELAY_REGEN_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with RELAY_REGEN_GOLDEN=1 to write it"
    assert actual == path.read_text(encoding="utf-8")


def only_recipient_type(data: dict[str, Any], index: int, rtype: str) -> dict[str, Any]:
    data["messages"][index]["recipientType"] = rtype
    data["messages"][index]["recipientType_v2"] = rtype
    return data


@pytest.mark.parametrize("fmt", ["md", "html", "txt"])
@pytest.mark.parametrize("index", sorted(MESSAGES))
def test_shipped_recipient_type_templates_match_golden_files(index: int, fmt: str) -> None:
    out = render(sample_notification(), fmt, index)
    assert out.template == f"{KIND}/{MESSAGES[index]}.{fmt}.j2"
    assert out.error is None
    check_golden(f"{KIND}.{MESSAGES[index]}.{fmt}.txt", as_golden(out))


@pytest.mark.parametrize("fmt", ["md", "html", "txt"])
def test_shipped_default_templates_match_golden_files(fmt: str) -> None:
    data = only_recipient_type(sample_notification(), 0, "recipient-type:someone-new")
    out = render(data, fmt)
    assert out.template == f"{KIND}/default.{fmt}.j2"
    check_golden(f"{KIND}.default.{fmt}.txt", as_golden(out))


def test_every_shipped_leaf_template_has_a_golden_file() -> None:
    leaves = {p.name.removesuffix(".j2") for p in (BUILTIN_DIR / KIND).glob("*.j2") if not p.name.startswith("_")}
    golden = {p.name.removeprefix(f"{KIND}.").removesuffix(".txt") for p in GOLDEN.glob(f"{KIND}.*.txt")}
    assert leaves == golden


def test_html_templates_are_email_safe() -> None:
    body = render(sample_notification(), "html").body
    assert "max-width:600px" in body
    assert "<style" not in body and "<link" not in body and "<script" not in body
    assert "src=" not in body  # no images: nothing external to load or to block
    assert body.count("<table") >= 3


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"requester": None, "requestedResource": None, "displayFields": None, "requestedUsers": None},
        {"requestedResource": {"consumableInterface": {}, "parentSystem": {"version": 2}}, "requestedAt": 17},
        {"requestedResource": {"parentSystem": {"relativeLink": "https://elsewhere.example/x"}}},
        {"requestedResource": {"parentSystem": {"relativeLink": "//elsewhere.example/x"}}},
        {"requestedResource": {"parentSystem": {"relativeLink": "/\\elsewhere.example/x"}}},
    ],
)
@pytest.mark.parametrize("fmt", ["md", "html", "txt"])
@pytest.mark.parametrize("index", sorted(MESSAGES))
def test_shipped_templates_render_a_body_missing_fields(body: dict[str, Any], fmt: str, index: int) -> None:
    out = render(sample_notification(body=body), fmt, index)
    assert out.error is None
    assert out.template.startswith(f"{KIND}/")
    assert "a resource" in out.title
    assert "elsewhere.example" not in out.body  # only links below the platform's own URL


def test_no_platform_url_means_no_link() -> None:
    data = sample_notification()
    notification = Notification.model_validate(data)
    out = Renderer(None).render(notification, delivery(0, "recipient-type:system-owner"), "html")
    assert out.error is None
    assert "href" not in out.body
    assert "/marketplace/systems/" not in out.body


# --- lookup chain --------------------------------------------------------------------------------


def write(root: Path, name: str, source: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")


def test_chain_recipient_type_then_default_then_platform(tmp_path: Path) -> None:
    data = sample_notification(kind="notification:my-kind")
    write(tmp_path, "my-kind/system-owner.txt.j2", "owner")
    write(tmp_path, "my-kind/default.txt.j2", "default")
    assert render(data, "txt", 0, tdir=tmp_path).body == "owner"
    assert render(data, "txt", 1, tdir=tmp_path).body == "default"
    (tmp_path / "my-kind/default.txt.j2").unlink()
    out = render(data, "txt", 1, tdir=tmp_path)
    assert (out.template, out.body, out.error) == ("platform", data["messages"][1]["message"], None)


def test_v2_recipient_type_is_tried_before_the_legacy_one(tmp_path: Path) -> None:
    data = sample_notification(kind="notification:my-kind")
    write(tmp_path, "my-kind/system-owner.txt.j2", "legacy")
    write(tmp_path, "my-kind/project-data-access-manager.txt.j2", "v2")
    assert render(data, "txt", 2, tdir=tmp_path).body == "v2"


def test_operator_template_overrides_the_shipped_one(tmp_path: Path) -> None:
    write(tmp_path, f"{KIND}/system-owner.html.j2", "{% block title %}Mine{% endblock %}<p>mine</p>")
    out = render(sample_notification(), "html", 0, tdir=tmp_path)
    assert (out.title, out.body) == ("Mine", "<p>mine</p>")
    assert out.text is not None and "Alice Rossi" in out.text  # the shipped .txt.j2 sibling still applies


def test_operator_can_override_the_shared_email_layout(tmp_path: Path) -> None:
    write(tmp_path, "_layouts/email.html.j2", "<div>{{ title }}</div>{% block content %}{% endblock %}")
    out = render(sample_notification(), "html", 1, tdir=tmp_path)
    assert out.body.startswith("<div>Your access request failed: Invoices SQL output port</div>")


def test_template_platform_always_uses_the_platform_text() -> None:
    data = sample_notification()
    out = render(data, "txt", 0, template="platform")
    assert (out.template, out.title, out.body) == (
        "platform",
        data["messages"][0]["title"],
        data["messages"][0]["message"],
    )


def test_named_template(tmp_path: Path) -> None:
    write(tmp_path, "shared/brief.md.j2", "{% block title %}Brief{% endblock %}{{ kind_name }}")
    out = render(sample_notification(), "md", 0, template="shared/brief", tdir=tmp_path)
    assert (out.template, out.title, out.body) == ("shared/brief.md.j2", "Brief", KIND)


def test_failing_template_falls_back_to_platform_text_and_says_why(tmp_path: Path) -> None:
    write(tmp_path, f"{KIND}/system-owner.txt.j2", "{{ body.no_such_field }}")
    data = sample_notification()
    out = render(data, "txt", 0, tdir=tmp_path)
    assert (out.template, out.body) == ("platform", data["messages"][0]["message"])
    assert out.error is not None and f"{KIND}/system-owner.txt.j2" in out.error


# --- payload values are data --------------------------------------------------------------------


HOSTILE = "<script>alert('x')</script> & {{ 7*7 }} {% if true %}yes{% endif %}"


def hostile_sample() -> dict[str, Any]:
    data = sample_notification()
    data["body"]["requester"]["displayName"] = HOSTILE
    data["body"]["requestedResource"]["consumableInterface"]["displayName"] = "R&D <data>"
    return data


def test_payload_values_are_raw_in_text() -> None:
    out = render(hostile_sample(), "txt")
    assert HOSTILE in out.body
    assert "49" not in out.body


def test_payload_values_are_escaped_for_chat_markdown() -> None:
    out = render(hostile_sample(), "md")
    assert "\\<script\\>alert\\('x'\\)\\</script\\> & {{ 7*7 }} {% if true %}yes{% endif %}" in out.body
    assert "**R&D \\<data\\>**" in out.body
    assert "49" not in out.body


def test_payload_values_are_escaped_in_html() -> None:
    out = render(hostile_sample(), "html")
    assert "<script>" not in out.body
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; {{ 7*7 }} {% if true %}yes{% endif %}" in out.body
    assert out.text is not None and HOSTILE in out.text


@pytest.mark.parametrize("fmt", ["md", "html", "txt"])
def test_titles_are_never_html_escaped(fmt: str) -> None:
    assert render(hostile_sample(), fmt).title == "Access request failed: R&D <data>"


def test_platform_text_with_template_syntax_stays_literal() -> None:
    data = sample_notification(kind="notification:unknown-kind")
    data["messages"][0]["title"] = "{{ 7*7 }}"
    data["messages"][0]["message"] = "{% for x in range(3) %}{{ x }}{% endfor %} <b>"
    out = render(data, "html")
    assert out.title == "{{ 7*7 }}"
    assert "{% for x in range(3) %}{{ x }}{% endfor %} &lt;b&gt;" in out.body
    assert out.text == data["messages"][0]["message"]


# --- every shipped template compiles ------------------------------------------------------------


def test_relay_check_compiles_every_shipped_template(tmp_path: Path) -> None:
    config = Config.model_validate({"templates": {"dir": str(tmp_path), "builtin": True}, "channels": {}})
    problems, notes = check_templates(config)
    assert problems == []
    shipped = len(list(BUILTIN_DIR.rglob("*.j2")))
    assert f"{shipped} built-in template(s) compiled in {BUILTIN_DIR} (templates.builtin: true)" in notes
