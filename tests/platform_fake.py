"""A local HTTP server that plays the platform: token exchange with expiry, catalog users and groups."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.servers import serve_http

ACCESS_TOKEN = "svc-access-token-9f8e7d"


@dataclass
class FakePlatform:
    users: dict[str, str | None] = field(default_factory=dict)  # name -> e-mail (None: no e-mail)
    groups: dict[str, list[str]] = field(default_factory=dict)  # name -> member refs
    # name -> the name people know (a user's spec.profile.displayName, a group's metadata.title)
    display_names: dict[str, str] = field(default_factory=dict)
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # every GET's path, as it arrived
    auth_headers: list[str] = field(default_factory=list)
    jwts: dict[str, float] = field(default_factory=dict)  # jwt -> expiry (monotonic)
    down: bool = False
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> FakePlatform:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up waiting
                    self.wfile.write(raw)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if fake.down:
                    return self._answer(503, {"error": "down"})
                if self.path != "/api/auth/access-tokens/jwt":
                    return self._answer(404, {"error": "no such path"})
                with fake.lock:
                    fake.exchanges.append(body)
                    if body.get("access_token") != ACCESS_TOKEN:
                        return self._answer(401, {"error": "bad token"})
                    jwt = f"jwt-{len(fake.exchanges)}-secret"
                    fake.jwts[jwt] = time.monotonic() + float(body.get("duration_seconds", 300))
                return self._answer(200, {"jwt": jwt})

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization", "")
                with fake.lock:
                    fake.auth_headers.append(header)
                if header.startswith("Bearer "):
                    expiry = fake.jwts.get(header[7:])
                    return expiry is not None and expiry > time.monotonic()
                if header.startswith("Basic "):
                    return base64.b64decode(header[6:]).decode() == f"platform:{ACCESS_TOKEN}"
                return False

            def do_GET(self) -> None:
                if fake.delay:
                    time.sleep(fake.delay)
                if fake.down:
                    return self._answer(503, {"error": "down"})
                with fake.lock:
                    fake.paths.append(self.path)
                if not self._authorized():
                    return self._answer(401, {"error": "unauthorized"})
                prefix = "/api/catalog/entities/by-name/"
                if not self.path.startswith(prefix):
                    return self._answer(404, {"error": "no such path"})
                kind, namespace, name = self.path[len(prefix) :].split("/")
                with fake.lock:
                    fake.lookups.append(f"{kind}:{namespace}/{name}")
                shown = fake.display_names.get(name)
                if kind == "user" and name in fake.users:
                    email = fake.users[name]
                    profile = {"email": email, "displayName": shown or name} if email else {}
                    if shown and not email:
                        profile["displayName"] = shown
                    return self._answer(200, {"kind": "User", "metadata": {"name": name}, "spec": {"profile": profile}})
                if kind == "group" and name in fake.groups:
                    relations = [{"type": "hasMember", "targetRef": ref} for ref in fake.groups[name]]
                    metadata = {"name": name, **({"title": shown} if shown else {})}
                    return self._answer(200, {"kind": "Group", "metadata": metadata, "relations": relations})
                return self._answer(404, {"error": "not found"})

            def log_message(self, *args: Any) -> None:
                pass

        self.server, self.url = serve_http(Handler)
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def expire_all(self) -> None:
        with self.lock:
            for jwt in self.jwts:
                self.jwts[jwt] = 0.0
