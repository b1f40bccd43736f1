"""`relay sink`: prints what the example config's channels send (JSON webhooks on an HTTP port, e-mails on an SMTP
port), to try relay on a laptop. `fail`: refuses everything (500, 451); `save`: keeps each message as it came in that
folder (`.eml`, `.json` or `.txt`). Not for production."""

from __future__ import annotations

import email
import email.policy
import itertools
import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller


def _print(*lines: str) -> None:
    print("\n".join(lines), flush=True)


class Saver:
    """Keeps each message received in a folder, named in the order they came: `0001-<time>-email.eml`."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def save(self, what: str, suffix: str, raw: bytes) -> None:
        if self.folder is None:
            return
        with self._lock:
            number = next(self._numbers)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = self.folder / f"{number:04d}-{stamp}-{what}{suffix}"
        path.write_bytes(raw)
        _print(f"    saved as {path}")


class _Mail:
    def __init__(self, fail: bool, saver: Saver | None = None) -> None:
        self.fail = fail
        self.saver = saver or Saver(None)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.saver.save("email", ".eml", envelope.original_content or envelope.content)
        if self.fail:
            _print(f"--- e-mail to {', '.join(envelope.rcpt_tos)}: {msg['Subject']}: refused with 451 (--fail)", "")
            return "451 4.3.0 relay sink --fail: refusing on purpose"
        text = msg.get_body(preferencelist=("plain", "html"))
        body = text.get_content() if text is not None else ""
        # One-click unsubscribe lives in a header (RFC 8058): shown, so that it can be tried from here.
        unsubscribe = [f"List-Unsubscribe: {msg['List-Unsubscribe']}"] if msg["List-Unsubscribe"] else []
        _print(
            f"--- e-mail to {', '.join(envelope.rcpt_tos)}: {msg['Subject']}",
            *unsubscribe,
            str(body).strip()[:2000],
            "",
        )
        return "250 OK"


def start_sink(
    http_port: int = 9999, smtp_port: int = 8025, host: str = "127.0.0.1", fail: bool = False, save: Path | None = None
) -> tuple[ThreadingHTTPServer, Controller]:
    """The sink's two servers, started (stop them with `http.shutdown()` and `smtp.stop()`)."""
    saver = Saver(save)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            shown, suffix = raw.decode(errors="replace"), ".txt"
            try:
                data = json.loads(raw)
                suffix = ".json"
                if isinstance(data, dict):
                    shown = f"{data.get('title', '')}\n{data.get('message', '')}"
            except ValueError:
                pass
            saver.save("webhook", suffix, raw)
            status, body = (500, b"relay sink --fail: refusing on purpose") if fail else (200, b"")
            _print(f"--- webhook {self.path}" + (": answered 500 (--fail)" if fail else ""), shown.strip()[:2000], "")
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer((host, http_port), Handler)
    # The raw message as the client sent it (`original_content`), not aiosmtpd's decoded copy.
    smtp = Controller(_Mail(fail, saver), hostname=host, port=smtp_port, decode_data=False)
    smtp.start()
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, smtp


def run_sink(
    http_port: int = 9999, smtp_port: int = 8025, host: str = "127.0.0.1", fail: bool = False, save: Path | None = None
) -> None:
    http, smtp = start_sink(http_port, smtp_port, host, fail, save)
    failing = "; FAILING everything on purpose (--fail)" if fail else ""
    saving = f"; saving each message in {save}" if save is not None else ""
    _print(
        f"sink: webhooks on http://{host}:{http_port}/..., e-mail on smtp://{host}:{smtp_port}{failing}{saving};"
        " Ctrl-C to stop"
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        http.shutdown()
        smtp.stop()
