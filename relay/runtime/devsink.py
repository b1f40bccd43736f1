"""`relay sink`: a catcher for trying relay on a laptop. It prints what the example config's
channels send: JSON webhooks on an HTTP port and e-mails on an SMTP port. Not for production."""

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
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        text = msg.get_body(preferencelist=("plain", "html"))
        body = text.get_content() if text is not None else ""
        _print(f"--- e-mail to {', '.join(envelope.rcpt_tos)}: {msg['Subject']}", str(body).strip()[:2000], "")
        return "250 OK"


def run_sink(http_port: int = 9999, smtp_port: int = 8025, host: str = "127.0.0.1") -> None:
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
            _print(f"--- webhook {self.path}", shown.strip()[:2000], "")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer((host, http_port), Handler)
    smtp = Controller(_Mail(), hostname=host, port=smtp_port)
    smtp.start()
    threading.Thread(target=http.serve_forever, daemon=True).start()
    _print(f"sink: webhooks on http://{host}:{http_port}/..., e-mail on smtp://{host}:{smtp_port}; Ctrl-C to stop")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        http.shutdown()
        smtp.stop()
