"""`relay sink`'s e-mail side prints what a newcomer needs to try one-click unsubscribe: the header."""

from __future__ import annotations

import asyncio
import email
import email.policy
import smtplib
import urllib.request
from email.message import EmailMessage
from pathlib import Path
from types import SimpleNamespace

import pytest

from relay.runtime.devsink import _Mail, start_sink
from tests.servers import free_port


def test_the_sink_prints_an_emails_list_unsubscribe_header(capsys: pytest.CaptureFixture[str]) -> None:
    msg = EmailMessage()
    msg["Subject"] = "Access request failed"
    msg["List-Unsubscribe"] = "<http://127.0.0.1:8080/unsubscribe/tok>"
    msg.set_content("Your access request failed.")
    envelope = SimpleNamespace(content=msg.as_bytes(), original_content=None, rcpt_tos=["alice.rossi@example.com"])
    assert asyncio.run(_Mail(fail=False).handle_DATA(None, None, envelope)) == "250 OK"
    out = capsys.readouterr().out
    assert "List-Unsubscribe: <http://127.0.0.1:8080/unsubscribe/tok>" in out and "Your access request failed." in out


def test_the_sink_saves_each_raw_message_with_save(tmp_path: Path) -> None:
    """A real e-mail through SMTP and a real webhook through HTTP: the .eml is the message as sent (headers
    included), the .json the body byte for byte."""
    http_port, smtp_port = free_port(), free_port()
    folder = tmp_path / "saved"
    http, smtp = start_sink(http_port, smtp_port, save=folder)
    try:
        msg = EmailMessage()
        msg["Subject"] = "Access request failed"
        msg["From"], msg["To"] = "relay@example.com", "alice.rossi@example.com"
        msg["List-Unsubscribe"] = "<http://127.0.0.1:8080/unsubscribe/tok>"
        msg.set_content("Your access request failed.")
        with smtplib.SMTP("127.0.0.1", smtp_port) as client:
            client.send_message(msg)
        body = b'{"title": "T", "message": "M \\u00e8"}'
        request = urllib.request.Request(f"http://127.0.0.1:{http_port}/hook", body, method="POST")
        urllib.request.urlopen(request).close()
    finally:
        http.shutdown()
        http.server_close()
        smtp.stop()
    eml, hook = sorted(folder.iterdir())
    assert eml.name.startswith("0001-") and eml.name.endswith("-email.eml")
    saved = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
    assert saved["List-Unsubscribe"] == "<http://127.0.0.1:8080/unsubscribe/tok>"
    assert saved["Subject"] == "Access request failed" and "Your access request failed." in saved.get_content()
    assert hook.name.startswith("0002-") and hook.name.endswith("-webhook.json") and hook.read_bytes() == body
