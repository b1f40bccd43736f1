"""Secret scrubbing hides credentials and nothing else (issue 18: `****-slack` in log lines)."""

from __future__ import annotations

from relay.config import Config
from relay.core.redaction import MASK, Redactor, config_secrets, url_secrets


def _config(**channels: str) -> Config:
    return Config.model_validate({"channels": {name: {"url": url} for name, url in channels.items()}})


def test_a_plain_path_word_is_no_secret() -> None:
    secrets = url_secrets("json://hooks.example.com/owners/in?token=s3cr3t-T0KEN")
    assert "owners" not in secrets
    assert "s3cr3t-T0KEN" in secrets


def test_a_chat_url_path_word_is_still_a_secret() -> None:
    # Chat URLs carry tokens in their path, however plain they look.
    assert "sig-abcdef" in url_secrets("workflows://prod-01.westus.logic.azure.com:443/wfid12345/sig-abcdef")


def test_a_token_in_a_path_is_still_a_secret() -> None:
    secrets = url_secrets("slack://T1234ABCD/B1234ABCD/Xy9zAbCdEfGhIjKlMnOpQrSt")
    assert {"T1234ABCD", "B1234ABCD", "Xy9zAbCdEfGhIjKlMnOpQrSt"} <= set(secrets)
    # A long lowercase token is still a token, not a word.
    assert "abcdefghijklmnopqrstuvwx" in url_secrets("slack://T1/B1/abcdefghijklmnopqrstuvwx")


def test_channel_and_kind_names_are_never_masked() -> None:
    config = _config(
        **{
            "owners-slack": "slack://T1234ABCD/B1234ABCD/Xy9zAbCdEfGhIjKlMnOpQrSt",
            "owners-hook": "json://sink.example.com/owners?+X-Token=hdr-SECRET-42",
            "slack": "json://sink.example.com/slack",
        }
    )
    redactor = Redactor(config_secrets(config))
    line = (
        "delivered channel=owners-slack kind=notification:access-control-request-failed "
        "to json://sink.example.com/owners with hdr-SECRET-42 and Xy9zAbCdEfGhIjKlMnOpQrSt"
    )
    shown = redactor.scrub(line)
    assert "channel=owners-slack" in shown
    assert "kind=notification:access-control-request-failed" in shown
    assert "hdr-SECRET-42" not in shown and "Xy9zAbCdEfGhIjKlMnOpQrSt" not in shown
    assert shown.count(MASK) == 2
