"""`relay preview` and `relay check`, run through the command line entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from relay.cli import main
from tests.conftest import sample_notification

SLACK_TOKEN = "abcdefghijklmnopqrstuvwx"
SMTP_PASSWORD = "Sup3rSecretPw"
HEADER_TOKEN = "hdr-token-98765"


def write_config(tmp_path: Path, **overrides: Any) -> Path:
    data: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),
        "platform": {"url": "https://platform.example.com/"},
        "templates": {"dir": str(tmp_path / "templates"), "builtin": True},
        "channels": {
            "owners-slack": {"url": f"slack://T1234ABCD/B1234ABCD/{SLACK_TOKEN}"},
            "requester-email": {
                "url": f"mailtos://relay:{SMTP_PASSWORD}@smtp.example.com?from=relay@example.com",
                "per_recipient": True,
            },
            "audit": {"url": f"json://audit.example.com/in?+X-Token={HEADER_TOKEN}"},
        },
        "routes": [
            {"recipient_types": ["recipient-type:system-owner"], "channels": ["owners-slack"]},
            {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["requester-email"]},
        ],
        "default": {"channels": ["audit"]},
    }
    data.update(overrides)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def write_payload(tmp_path: Path, **overrides: Any) -> Path:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(sample_notification(**overrides)), encoding="utf-8")
    return path


def assert_no_secret(text: str) -> None:
    for secret in (SLACK_TOKEN, SMTP_PASSWORD, HEADER_TOKEN):
        assert secret not in text


def test_preview_of_the_sample_shows_plan_and_rendered_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["preview", str(write_payload(tmp_path)), "--config", str(write_config(tmp_path))]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert_no_secret(out)
    assert "-> owners-slack" in out
    assert "template: access-control-request-failed/system-owner.md.j2 (md)" in out
    assert "title: Your access request failed: Invoices SQL output port" in out
    assert "https://platform.example.com/marketplace/systems/urn:dmb:dp:finance:invoices:1" in out
    assert "blocks=yes" in out  # Slack gets Block Kit
    assert "--- plain-text part\n    Your request for access to Invoices SQL output port" in out


def test_preview_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["preview", str(write_payload(tmp_path)), "--config", str(write_config(tmp_path)), "--format", "json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert_no_secret(out)
    deliveries = json.loads(out)["deliveries"]
    plan = [(d["message"], d["channel"], d["state"], d["template"], d["format"]) for d in deliveries]
    kind = "access-control-request-failed"
    assert plan == [
        (0, "owners-slack", "would send", f"{kind}/system-owner.md.j2", "md"),
        (1, "requester-email", "would send", f"{kind}/access-control-requester.html.j2", "html"),
        # routed by its legacy type, rendered for its v2 type
        (2, "owners-slack", "would send", f"{kind}/project-data-access-manager.md.j2", "md"),
    ]
    assert deliveries[1]["address"] == "alice.rossi@example.com"


def test_preview_of_an_unknown_kind_uses_the_platform_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [{"recipientType": "recipient-type:new", "recipients": [], "title": "Hi {{ x }}", "message": "Body"}]
    payload = write_payload(tmp_path, kind="notification:brand-new", messages=messages)
    assert main(["preview", str(payload), "--config", str(write_config(tmp_path)), "--format", "json"]) == 0
    (delivery,) = json.loads(capsys.readouterr().out)["deliveries"]
    assert delivery["channel"] == "audit"
    assert (delivery["template"], delivery["title"], delivery["body"]) == ("platform", "Hi {{ x }}", "Body")


def test_preview_of_an_invalid_payload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = tmp_path / "bad.json"
    payload.write_text('{"kind": "notification:x"}', encoding="utf-8")
    assert main(["preview", str(payload), "--config", str(write_config(tmp_path))]) == 2
    assert "not a valid notification" in capsys.readouterr().err


def test_check_passes_a_good_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--config", str(write_config(tmp_path))]) == 0
    out = capsys.readouterr()
    assert "config is valid" in out.out
    assert_no_secret(out.out + out.err)


def test_check_reports_missing_named_template_and_syntax_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "templates" / "access-control-request-failed" / "system-owner.md.j2"
    broken.parent.mkdir(parents=True)
    broken.write_text("line one\n{% if body %}\nno endif\n", encoding="utf-8")
    routes = [{"channels": ["owners-slack"], "template": "shared/nowhere"}]
    assert main(["check", "--config", str(write_config(tmp_path, routes=routes))]) == 1
    err = capsys.readouterr().err
    assert f"template {broken}, line 3" in err
    assert "routes[0].template: no template 'shared/nowhere'" in err
    assert "2 problem(s) found" in err


def test_check_reports_an_invalid_channel_url_without_its_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    channels = {
        "owners-slack": {"url": f"slack://T1234ABCD/{SLACK_TOKEN}"},
        "requester-email": {"url": f"mailtos://relay:{SMTP_PASSWORD}@smtp.example.com?from=relay@example.com"},
        "audit": {"url": f"nosuchscheme://user:{SMTP_PASSWORD}@host/x"},
    }
    assert main(["check", "--config", str(write_config(tmp_path, channels=channels))]) == 1
    out = capsys.readouterr()
    assert "channels.owners-slack.url" in out.err
    assert "channels.audit.url" in out.err
    assert_no_secret(out.out + out.err)


def test_preview_text_says_where_each_per_recipient_message_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = sample_notification()["messages"]
    requester = messages[1]
    requester["recipients"] = [
        requester["recipients"][0],  # an address in the payload
        {"userRef": "user:default/giulia.bianchi", "spec.email": None},  # looked up in the catalog
        {"userRef": None, "spec.email": "not-an-address"},  # nothing to send to
    ]
    payload = write_payload(tmp_path, messages=[requester])
    assert main(["preview", str(payload), "--config", str(write_config(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert_no_secret(out)
    assert "    to: alice.rossi@example.com (user:default/alice.rossi)\n" in out
    assert "    to: user:default/giulia.bianchi, whose address is looked up in the platform catalog when sent\n" in out
    assert "skipped:" in out
    # The channel's target is shown for every delivery, as in the json form.
    assert out.count("-> requester-email mailtos://") == 3


def test_preview_text_names_a_channel_audience(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payload = write_payload(tmp_path, messages=[sample_notification()["messages"][0]])
    assert main(["preview", str(payload), "--config", str(write_config(tmp_path))]) == 0
    assert "    to: the channel itself\n" in capsys.readouterr().out


def test_check_and_preview_show_the_same_channel_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(write_config(tmp_path))
    assert main(["check", "--config", config]) == 0
    checked = next(line for line in capsys.readouterr().out.splitlines() if "channel owners-slack:" in line)
    args = ["preview", str(write_payload(tmp_path)), "--config", config, "--format", "json"]
    assert main(args) == 0
    previewed = json.loads(capsys.readouterr().out)["deliveries"][0]
    assert previewed["channel"] == "owners-slack"
    assert checked.endswith(previewed["target"])
    assert "blocks=yes" in previewed["target"]


# --- routes with matchers -------------------------------------------------------------------------

MATCHER_ROUTES = [
    {
        "name": "production-owners",
        "recipient_types": ["recipient-type:system-owner"],
        "matchers": ['body.requestedResource.environment="production"'],
        "channels": ["owners-slack"],
    },
    {"recipient_types": ["recipient-type:access-control-requester"], "channels": ["requester-email"]},
]


def test_check_refuses_a_malformed_matcher_naming_route_and_matcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    routes = [dict(MATCHER_ROUTES[0], matchers=['body.requestedResource.environment=~"prod(uction"'])]
    assert main(["check", "--config", str(write_config(tmp_path, routes=routes))]) != 0
    err = capsys.readouterr().err
    assert "routes[0].matchers" in err and "route 'production-owners'" in err
    assert 'body.requestedResource.environment=~"prod(uction"' in err
    assert "not valid" in err


def test_preview_names_the_route_of_each_delivery(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(write_config(tmp_path, routes=MATCHER_ROUTES))
    assert main(["preview", str(write_payload(tmp_path)), "--config", config, "--format", "json"]) == 0
    deliveries = json.loads(capsys.readouterr().out)["deliveries"]
    assert [(d["message"], d["channel"], d["route"]) for d in deliveries] == [
        (0, "owners-slack", "production-owners"),
        (1, "requester-email", "routes[1]"),
        (2, "owners-slack", "production-owners"),  # its v2 type is not routed: the legacy type's route
    ]
    assert main(["preview", str(write_payload(tmp_path)), "--config", config]) == 0
    out = capsys.readouterr().out
    assert "-> owners-slack" in out and "    route: production-owners" in out
    assert "    route: routes[1]" in out

    staging = write_payload(tmp_path)
    data = json.loads(staging.read_text())
    data["body"]["requestedResource"]["environment"] = "staging"
    staging.write_text(json.dumps(data))
    assert main(["preview", str(staging), "--config", config, "--format", "json"]) == 0
    deliveries = json.loads(capsys.readouterr().out)["deliveries"]
    # Not production: the owners' route does not match, so the owners' messages take the default route.
    assert [(d["channel"], d["route"]) for d in deliveries] == [
        ("audit", "default"),
        ("requester-email", "routes[1]"),
        ("audit", "default"),
    ]


PREFS_SECRET = "a-secret-of-at-least-thirty-two-bytes!"


def test_preview_shows_the_persons_links_footer_and_list_unsubscribe_as_sending_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The e-mail's "Manage your notifications" footer, the text template's branch on `preferences_url`, and
    the List-Unsubscribe header: a preview left them all out. The links' tokens show as ****."""
    config = write_config(
        tmp_path,
        preferences={"public_url": "https://relay.example.com", "secret": PREFS_SECRET},
        channels={
            "requester-email": {
                "url": f"mailtos://relay:{SMTP_PASSWORD}@smtp.example.com?from=relay@example.com",
                "per_recipient": True,
            },
            "requester-text": {"url": "json://audit.example.com/in", "per_recipient": True, "format": "txt"},
            "audit": {"url": "json://audit.example.com/in"},
        },
        routes=[
            {
                "recipient_types": ["recipient-type:access-control-requester"],
                "channels": ["requester-email", "requester-text"],
            }
        ],
    )
    assert main(["preview", str(write_payload(tmp_path)), "--config", str(config), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert PREFS_SECRET not in out
    items = {d["channel"]: d for d in json.loads(out)["deliveries"]}
    email, text = items["requester-email"], items["requester-text"]
    assert "Manage your notifications" in email["body"]
    assert "https://relay.example.com/preferences/****" in email["body"]
    assert email["headers"]["List-Unsubscribe"].startswith("<https://relay.example.com/unsubscribe/****")
    assert email["headers"]["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "Manage your notifications: https://relay.example.com/preferences/****" in text["body"]  # its branch
    assert "headers" not in text
    main(["preview", str(write_payload(tmp_path)), "--config", str(config)])
    assert "    header List-Unsubscribe: <https://relay.example.com/unsubscribe/****>" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["routes: [\n  - {channels: [a]\n", "routes: 5\n"])
def test_check_exits_1_on_malformed_yaml_as_on_a_schema_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Malformed YAML exited 2 (as a misused command line does), a schema error 1."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert main(["check", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "error " in err and "1 problem(s) found" in err
