"""`relay sink`: a catcher for trying relay on a laptop. It prints what the example config's
channels send: JSON webhooks on an HTTP port and e-mails on an SMTP port. With `fail`, it refuses
everything it is sent (webhooks 500, e-mail 451), to try failures and replay. Not for production."""

from __future__ import annotations

import email
import email.policy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


def _print(*lines: str) -> None:
    print("\n".join(lines), flush=True)


class _Mail:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
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


def run_sink(http_port: int = 9999, smtp_port: int = 8025, host: str = "127.0.0.1", fail: bool = False) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                data = json.loads(raw)
                if isinstance(data, dict):
                    shown = f"{data.get('title', '')}\n{data.get('message', '')}"
                else:
                    shown = raw.decode()
            except ValueError:
                shown = raw.decode(errors="replace")
            if fail:
                _print(f"--- webhook {self.path}: answered 500 (--fail)", shown.strip()[:2000], "")
                body = b"relay sink --fail: refusing on purpose"
                self.send_response(500)
            else:
                _print(f"--- webhook {self.path}", shown.strip()[:2000], "")
                body = b""
                self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer((host, http_port), Handler)
    smtp = Controller(_Mail(fail), hostname=host, port=smtp_port)
    smtp.start()
    threading.Thread(target=http.serve_forever, daemon=True).start()
    failing = "; FAILING everything on purpose (--fail)" if fail else ""
    _print(
        f"sink: webhooks on http://{host}:{http_port}/..., e-mail on smtp://{host}:{smtp_port}{failing}; Ctrl-C to stop"
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        http.shutdown()
        smtp.stop()
