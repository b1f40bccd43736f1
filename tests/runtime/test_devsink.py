"""`relay sink`'s e-mail side prints what a newcomer needs to try one-click unsubscribe: the header."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from types import SimpleNamespace

import pytest

from relay.runtime.devsink import _Mail


def test_the_sink_prints_an_emails_list_unsubscribe_header(capsys: pytest.CaptureFixture[str]) -> None:
    msg = EmailMessage()
    msg["Subject"] = "Access request failed"
    msg["List-Unsubscribe"] = "<http://127.0.0.1:8080/unsubscribe/tok>"
    msg.set_content("Your access request failed.")
    envelope = SimpleNamespace(content=msg.as_bytes(), rcpt_tos=["alice.rossi@example.com"])
    assert asyncio.run(_Mail(fail=False).handle_DATA(None, None, envelope)) == "250 OK"
    out = capsys.readouterr().out
    assert "List-Unsubscribe: <http://127.0.0.1:8080/unsubscribe/tok>" in out and "Your access request failed." in out
