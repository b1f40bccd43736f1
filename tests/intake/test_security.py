"""Hostile callers: HMAC signatures, payload limits, header sizes, and the redaction helpers."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import uvicorn
from starlette.testclient import TestClient

from relay.config import ConfigError, HmacAuth, ServerConfig
from relay.core.model import json_depth, too_deep_at
from relay.core.redaction import MASK, Redactor, forms, url_secrets
from relay.runtime.app import create_app
from relay.runtime.bootstrap import Runtime
from relay.web.auth import sign, signature_problem
from tests.conftest import WEBHOOK_TOKEN, post, sample_notification
from tests.intake.test_http import assert_error_body, raw_post
from tests.servers import free_port, wait_for

HMAC_SECRET = "hmac-secret-0123456789abcdef"
NEXT_SECRET = "hmac-secret-next-fedcba9876543210"


def signed(
    client: TestClient,
    raw: bytes,
    secret: str = HMAC_SECRET,
    timestamp: str | None = None,
    signature: str | None = None,
    **headers: str,
) -> Any:
    ts = timestamp if timestamp is not None else str(int(time.time()))
    sig = signature if signature is not None else sign(secret, ts, raw)
    all_headers = {"Content-Type": "application/json", "X-Relay-Signature": sig, "X-Relay-Timestamp": ts, **headers}
    return client.post("/webhook", content=raw, headers=all_headers)


@pytest.fixture
def hmac_client(make_runtime: Any) -> Iterator[TestClient]:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN], "hmac": {"secrets": [HMAC_SECRET, NEXT_SECRET]}}})
    with TestClient(create_app(rt)) as client:
        yield client


def body() -> bytes:
    return json.dumps(sample_notification()).encode()


# -- HMAC signatures -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [lambda s: s, lambda s: "sha256=" + s, lambda s: "SHA256=" + s.upper(), lambda s: f"sha256=bad, {s}"]
)
def test_a_valid_signature_is_accepted(hmac_client: TestClient, shape: Any) -> None:
    raw = body()
    ts = str(int(time.time()))
    answer = signed(hmac_client, raw, timestamp=ts, signature=shape(sign(HMAC_SECRET, ts, raw)))
    assert answer.status_code == 202, answer.text


def test_every_configured_secret_signs_during_rotation(hmac_client: TestClient) -> None:
    for secret in (HMAC_SECRET, NEXT_SECRET):
        assert signed(hmac_client, body(), secret).status_code == 202


def test_tokens_still_work_when_hmac_is_configured(hmac_client: TestClient) -> None:
    assert post(hmac_client, sample_notification()).status_code == 202


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(lambda raw, ts: {"secret": "hmac-secret-wrong-000000000000"}, id="wrong-secret"),
        pytest.param(lambda raw, ts: {"signature": sign(HMAC_SECRET, ts, raw + b" ")}, id="tampered-body"),
        pytest.param(lambda raw, ts: {"signature": sign(HMAC_SECRET, ts, raw)[:-1]}, id="truncated"),
        pytest.param(lambda raw, ts: {"signature": "sha256="}, id="empty"),
        pytest.param(lambda raw, ts: {"signature": "zz" * 32}, id="not-hex"),
        pytest.param(lambda raw, ts: {"timestamp": str(int(ts) - 301)}, id="stale"),
        # int() truncates: a few seconds over, so a slow run cannot bring it back within the tolerance.
        pytest.param(lambda raw, ts: {"timestamp": str(int(ts) + 305)}, id="future"),
        pytest.param(lambda raw, ts: {"timestamp": "yesterday"}, id="malformed-timestamp"),
        pytest.param(lambda raw, ts: {"timestamp": ""}, id="no-timestamp"),
        pytest.param(lambda raw, ts: {"timestamp": "1e99"}, id="huge-timestamp"),
        pytest.param(
            lambda raw, ts: {
                "timestamp": str(int(ts) - 1000),
                "signature": sign(HMAC_SECRET, str(int(ts) - 1000), raw),
            },
            id="replayed-old-call",
        ),
    ],
)
def test_bad_signatures_are_401_and_all_401s_look_alike(hmac_client: TestClient, attack: Any) -> None:
    raw = body()
    ts = str(int(time.time()))
    answer = signed(hmac_client, raw, **{"timestamp": ts, **attack(raw, ts)})
    refused = assert_error_body(answer, 401)
    # The same body as a call with no credentials at all: it never says which part failed.
    bare = hmac_client.post("/webhook", content=raw, headers={"Content-Type": "application/json"})
    assert refused == bare.json()


def test_a_signature_inside_the_tolerance_is_accepted(hmac_client: TestClient) -> None:
    raw = body()
    for skew in (-290, 290):
        ts = str(int(time.time()) + skew)
        assert signed(hmac_client, raw, timestamp=ts).status_code == 202
        raw = body()


def test_an_unsigned_call_is_refused_before_its_body_is_read(hmac_client: TestClient) -> None:
    # No token and no signature header: 401 at once, even for a body over the limit.
    answer = hmac_client.post("/webhook", content=b"x" * 2_000_000, headers={"Content-Type": "application/json"})
    assert_error_body(answer, 401)


def test_signature_check_is_constant_time_over_every_pair() -> None:
    signed_cfg = HmacAuth(secrets=[HMAC_SECRET, NEXT_SECRET], tolerance=60)
    ts = "1700000000"
    raw = b"{}"
    headers = {"x-relay-timestamp": ts, "x-relay-signature": sign(NEXT_SECRET, ts, raw)}
    assert signature_problem(signed_cfg, headers, raw, now=1700000030.0) is None
    assert signature_problem(signed_cfg, headers, raw, now=1700000061.0) == "signature timestamp outside the tolerance"
    assert signature_problem(signed_cfg, {**headers, "x-relay-signature": "00"}, raw, 1700000000.0) == (
        "signature mismatch"
    )


def test_hmac_config_takes_one_secret_or_many_and_refuses_short_ones() -> None:
    assert HmacAuth.model_validate({"secret": HMAC_SECRET}).secrets == [HMAC_SECRET]
    cfg = HmacAuth.model_validate({"secret": HMAC_SECRET, "secrets": [NEXT_SECRET], "tolerance": "2m"})
    assert cfg.secrets == [HMAC_SECRET, NEXT_SECRET] and cfg.tolerance == 120
    bad_configs: list[dict[str, Any]] = [
        {"secrets": []},
        {"secret": "short"},
        {"secrets": [HMAC_SECRET], "header": "Bad Header"},
    ]
    for bad in bad_configs:
        with pytest.raises(ValueError):
            HmacAuth.model_validate(bad)


def test_hmac_alone_enables_auth_and_is_listed_among_secrets() -> None:
    server = ServerConfig.model_validate({"auth": {"hmac": {"secret": HMAC_SECRET}}, "admin_tokens": ["adm-1234"]})
    assert server.auth.enabled
    assert set(server.secrets()) == {HMAC_SECRET, "adm-1234"}


def test_hmac_only_server_refuses_tokens(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"hmac": {"secret": HMAC_SECRET}}})
    with TestClient(create_app(rt)) as client:
        assert_error_body(post(client, sample_notification()), 401)
        assert signed(client, body()).status_code == 202


def test_hmac_settings_are_config_errors_with_the_key(tmp_path: Any) -> None:
    from relay.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"server": {"auth": {"hmac": {"secret": "short"}}}}))
    with pytest.raises(ConfigError, match=r"server\.auth\.hmac\.secrets"):
        load_config(path, environ={})


# -- payload limits ------------------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.update(messages=[p["messages"][0]] * 101), "messages"),
        (lambda p: p["messages"][1].update(recipients=[{"userRef": "user:x"}] * 1001), "messages.1.recipients"),
        (lambda p: p.update(kind="notification:" + "k" * 300), "kind"),
        (lambda p: p["metadata"].update(eventId="e" * 513), "metadata.eventId"),
    ],
)
def test_counts_and_lengths_over_the_limits_are_422_with_the_field(client: TestClient, mutate: Any, field: str) -> None:
    payload = sample_notification()
    mutate(payload)
    refused = assert_error_body(post(client, payload), 422)
    assert refused["inputErrorField"] == field


def test_counts_at_the_limits_are_accepted(client: TestClient) -> None:
    payload = sample_notification()
    payload["messages"] = [dict(payload["messages"][0], recipients=[{}])] * 99
    payload["messages"].append(dict(payload["messages"][0], recipients=[{"userRef": "user:x"}] * 1000))
    payload["kind"] = "k" * 256
    payload["metadata"]["eventId"] = "e" * 512
    assert post(client, payload).status_code == 202


def test_limits_are_configurable(make_runtime: Any) -> None:
    limits = {"max_messages": 2, "max_recipients": 1, "max_kind_length": 20, "max_event_id_length": 40, "max_depth": 8}
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "limits": limits})
    with TestClient(create_app(rt)) as client:
        payload = sample_notification(kind="notification:x", messages=[{"recipients": [{"userRef": "user:a"}]}] * 2)
        assert post(client, payload).status_code == 202
        payload = sample_notification(kind="notification:x", messages=[{"recipients": [{}, {}]}])
        refused = assert_error_body(post(client, payload), 422)
        assert refused["inputErrorField"] == "messages.0.recipients"
        assert "number of recipients: 2 is over the limit of 1" in refused["errors"][0]
        payload = sample_notification(kind="notification:x", messages=[{}] * 3)
        assert assert_error_body(post(client, payload), 422)["inputErrorField"] == "messages"
        payload = sample_notification(kind="notification:longer-than-20")
        assert assert_error_body(post(client, payload), 422)["inputErrorField"] == "kind"
        payload = sample_notification(kind="notification:x", messages=[])
        payload["metadata"]["eventId"] = "e" * 41
        assert assert_error_body(post(client, payload), 422)["inputErrorField"] == "metadata.eventId"
        payload = sample_notification(kind="notification:x", messages=[], body=nested(8))
        assert assert_error_body(post(client, payload), 422)["inputErrorField"].startswith("body")
        # A string where a list belongs is the schema's error, not a limit's, however long.
        for field, path in (("messages", "messages"), ("recipients", "messages.0.recipients")):
            payload = sample_notification(kind="notification:x", messages=[{}])
            (payload if field == "messages" else payload["messages"][0])[field] = "m" * 101
            refused = assert_error_body(post(client, payload), 422)
            assert refused["inputErrorField"] == path and "over the limit" not in refused["errors"][0], refused


def test_nesting_deeper_than_the_limit_is_422_naming_the_path(client: TestClient, rt: Runtime) -> None:
    payload = sample_notification()
    payload["body"]["deep"] = nested(31)  # the notification object and body add two levels: 33
    refused = assert_error_body(post(client, payload), 422)
    assert refused["inputErrorField"].startswith("body.deep.0.k.0.k")
    assert len(refused["inputErrorField"].split(".")) == 32
    assert "32 levels" in refused["errors"][0]
    payload["body"]["deep"] = nested(30)
    assert post(client, payload).status_code == 202
    metrics = client.get("/metrics").text
    assert 'relay_notifications_rejected_total{reason="limits",status="422"} 1' in metrics


@pytest.mark.parametrize("raw", [b"[" * 500_000, b'{"a":' * 100_000, b"[" * 100 + b"]" * 100])
def test_absurd_nesting_is_refused_fast_without_recursion(client: TestClient, raw: bytes) -> None:
    started = time.monotonic()
    refused = assert_error_body(raw_post(client, raw), 422)
    assert time.monotonic() - started < 2
    assert refused["inputErrorField"].count(".") == 31


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("5", 0),
        ("{}", 1),
        ('{"a": [1, {"b": "[[[[ not counted"}]}', 3),
        ('["\\"[", [[]]]', 3),
        ("]]]]", 0),
        ('"unterminated [[[', 0),
        ("[" * 1000, 1000),
    ],
)
def test_json_depth(text: str, depth: int) -> None:
    assert json_depth(text) == depth


def test_too_deep_at_names_the_first_container_over_the_limit() -> None:
    text = '{"a": {"b\\"c": [0, 1, [[{"d": 1}]]]}, "z": [[[[[[]]]]]]}'
    assert too_deep_at(text, 3) == 'a.b"c.2'
    assert too_deep_at(text, 5) == 'a.b"c.2.0.0'
    assert too_deep_at(text, 7) is None
    assert too_deep_at("[" * 10, 4) == "0.0.0.0"


@pytest.mark.parametrize("hostile", ['"' + '\\"' * 200_000, '"\\' * 200_000, '["' * 200_000, "{" * 400_000])
def test_depth_measures_stay_linear_on_hostile_text(hostile: str) -> None:
    started = time.monotonic()
    json_depth(hostile)
    too_deep_at(hostile, 32)
    assert time.monotonic() - started < 2


# -- header sizes (uvicorn's h11 parser, as `relay serve` and `relay api` configure it) -------------


@pytest.fixture
def live_server(rt: Runtime) -> Iterator[str]:
    port = free_port()
    config = uvicorn.Config(
        create_app(rt),
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        http="h11",
        h11_max_incomplete_event_size=rt.config.server.limits.max_header_bytes,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_header_of_the_platforms_maximum_size_passes_and_oversized_headers_are_400(live_server: str) -> None:
    # The platform's custom header values may be up to 4096 characters.
    token_header = {"X-Relay-Token": WEBHOOK_TOKEN, "X-Platform-Extra": "v" * 4096}
    ok = httpx2.post(f"{live_server}/webhook", json=sample_notification(), headers=token_header, timeout=10)
    assert ok.status_code == 202, ok.text
    huge = {"Authorization": f"Bearer {WEBHOOK_TOKEN}", "X-Padding": "p" * 20_000}
    refused = httpx2.post(f"{live_server}/webhook", json=sample_notification(), headers=huge, timeout=10)
    # Arrived in one read: h11 parsed it, the webhook refuses it with the platform's error body.
    assert_error_body(refused, 431)


def test_a_header_block_growing_past_the_limit_is_cut_off_by_h11(live_server: str) -> None:
    host, port = live_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"POST /webhook HTTP/1.1\r\nHost: relay\r\n")
        # 1 KiB lines, in pieces, never finished: the server answers and hangs up on the 17th or so.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(40):
                conn.sendall(b"X-Pad: " + b"p" * 1017 + b"\r\n")
                time.sleep(0.005)
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400")


def test_headers_over_the_limit_are_431_in_process(make_runtime: Any) -> None:
    rt = make_runtime(server={"auth": {"tokens": [WEBHOOK_TOKEN]}, "limits": {"max_header_bytes": 8192}})
    with TestClient(create_app(rt)) as client:
        ok = post(client, sample_notification(), headers={"X-Extra": "v" * 4096})
        assert ok.status_code == 202
        refused = assert_error_body(post(client, sample_notification(), headers={"X-Extra": "v" * 9000}), 431)
        assert "8192" in refused["errors"][0]


# -- redaction helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "leak"),
    [
        ("json://hooks.example.com/in?+Authorization=Bearer%20tok123456", "tok123456"),
        ("json://hooks.example.com/in?+X-Token=abc+defghi%2Fjkl", "defghi/jkl"),
        ("json://hooks.example.com/in?+X-Token=abc+defghi%2Fjkl", "defghi%2Fjkl"),
        ("mailtos://relay:p%40ssw0rd@smtp.example.com", "p@ssw0rd"),
        ("mailtos://relay:p%40ssw0rd@smtp.example.com", "p%40ssw0rd"),
        ("json://u:pw%2Bplus1@h.example.com/x", "pw+plus1"),
        ("json://u:pw%2Bplus1@h.example.com/x", "pw%2Bplus1"),
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "tiiajkdnlazkcoxridevi7fq"),
    ],
)
def test_redaction_hides_every_form_of_a_url_secret(url: str, leak: str) -> None:
    shown = Redactor(url_secrets(url)).scrub(f"failed: {leak} in {url}")
    assert leak.lower() not in shown.lower()
    assert MASK in shown


@pytest.mark.parametrize(
    ("url", "visible"),
    [
        ("mailtos://u:pw-secret-1@smtp.example.com?from=relay@example.com&mode=starttls", "smtp.example.com"),
        ("mailtos://u:pw-secret-1@smtp.example.com?from=relay@example.com&mode=starttls", "relay@example.com"),
        ("json://hooks.example.com/in?+X-Token=hdr-secret-99", "X-Token"),
        ("json://localhost:8080/in", "localhost"),
        ("mailtos://relay:pw-secret-1@smtp.example.com", "relay"),
        ("mailtos://apikey:SG.abc123def@smtp.example.com", "apikey"),
    ],
)
def test_redaction_leaves_hosts_addresses_and_header_names(url: str, visible: str) -> None:
    assert visible in Redactor(url_secrets(url)).scrub(f"{visible} via {url}")


def test_forms_cover_decoded_encoded_and_words() -> None:
    found = forms("Bearer%20abc%2Fdef+ghi")
    for form in ("Bearer abc/def+ghi", "Bearer abc/def ghi", "abc/def", "abc%2Fdef", "Bearer+abc%2Fdef%2Bghi"):
        assert form in found
    assert "Bearer" not in found


def test_redactor_hides_longest_first_and_ignores_short_pieces() -> None:
    r = Redactor(["abcd", "abcd1234efgh", "xyz"])
    assert r.scrub("key abcd1234efgh, abcd, xyz") == "key ****, ****, xyz"
    assert Redactor().scrub("nothing") == "nothing"


def test_basic_credentials_are_hidden_base64_encoded_too() -> None:
    secrets = url_secrets("json://user:pw-secret-42@hooks.example.com/x")
    assert base64.b64encode(b"user:pw-secret-42").decode() in secrets


def test_limits_bind_the_edge_only_not_workers_reading_stored_notifications() -> None:
    from relay.config import LimitsConfig
    from relay.core.model import Notification

    payload = sample_notification(messages=[{}] * 150)
    assert len(Notification.model_validate(payload).messages) == 150
    with pytest.raises(ValueError, match="number of messages: 150 is over the limit of 100"):
        Notification.model_validate(payload, context={"limits": LimitsConfig()})


def test_config_secrets_cover_every_credential_in_every_form(tmp_path: Any) -> None:
    from relay.config import Config
    from relay.core.redaction import config_secrets

    config = Config.model_validate(
        {
            "server": {
                "auth": {"tokens": ["tok-aaaa"], "basic": {"username": "u", "password": "p%2Fw-bbbb"}},
                "admin_tokens": ["adm-cccc"],
            },
            "channels": {"c": {"url": "json://h.example.com/x?+X-Key=k%20dddd"}},
        }
    )
    config.server.auth.hmac = HmacAuth.model_validate({"secret": HMAC_SECRET})
    found = config_secrets(config)
    for secret in ("tok-aaaa", "p/w-bbbb", "p%2Fw-bbbb", "adm-cccc", HMAC_SECRET, "k dddd", "k+dddd", "dddd"):
        assert secret in found, secret
    assert base64.b64encode(b"u:p%2Fw-bbbb").decode() in found
