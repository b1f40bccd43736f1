"""Platform catalog client: a recipient's e-mail (or a group's members' e-mails), and an entity's display name
(`display_name`), by entity reference, cached in Redis (docs/delivery.md, "Recipients' e-mail from the platform
catalog"). The token and the JWT it is exchanged for go only to the platform's URL and are never logged."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests
from redis import Redis
from redis.exceptions import RedisError

from relay.config import PlatformConfig
from relay.core.lookup import DOT_SEGMENTS, split_ref, unusable_ref
from relay.core.names import entity_display_name
from relay.core.recipients import user_field, valid_email
from relay.storage.records import PREFIX, metric_field
from relay.storage.tally import Counts

log = logging.getLogger("relay.delivery.catalog")
NEGATIVE_TTL = 300.0  # seconds an unknown user or a user without e-mail is remembered
REFRESH_MARGIN = 0.2  # exchange again when this share of the JWT's life is left
MAX_GROUP_MEMBERS = 1000
NAME_TIMEOUT = 2.0  # seconds at most one name look-up waits for the platform: a name is never worth more
NAME_PAUSE = 60.0  # seconds no name is asked after the platform failed to give one (e-mails still are)


class CatalogUnavailable(Exception):
    """The platform did not answer usefully (network, timeout, 5xx, refused credentials): retry later."""


@dataclass(frozen=True)
class EntityRef:
    kind: str
    namespace: str
    name: str

    @classmethod
    def parse(cls, ref: str) -> EntityRef | None:
        """`user:default/jane.doe`, `group:team-a`; None for one that cannot be looked up (a `.` or `..` part)."""
        parts = split_ref(ref)
        if parts is None or unusable_ref(ref) is not None:
            return None
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.kind}:{self.namespace}/{self.name}"


def entity_email(entity: dict[str, Any]) -> str | None:
    """A catalog entity's e-mail: its profile's, else its spec's, read as a payload's user fields are."""
    for value in (user_field(entity, "spec.profile.email"), user_field(entity, "spec.email")):
        if isinstance(value, str) and valid_email(value.strip()):
            return value.strip()
    return None


def member_refs(entity: dict[str, Any]) -> list[str]:
    """A group's members: its `hasMember` relations (Backstage), else `spec.members`."""
    refs = []
    for relation in entity.get("relations") or []:
        if isinstance(relation, dict) and relation.get("type") == "hasMember":
            target = relation.get("targetRef")
            if isinstance(target, str):
                refs.append(target)
    spec = entity.get("spec")
    if not refs and isinstance(spec, dict) and isinstance(spec.get("members"), list):
        refs = [m if ":" in m else f"user:default/{m}" for m in spec["members"] if isinstance(m, str)]
    return refs[:MAX_GROUP_MEMBERS]


class Catalog:
    def __init__(self, config: PlatformConfig, redis: Redis, counts: Counts | None = None) -> None:
        assert config.url, "the catalog needs platform.url"
        self.config = config
        self.base = config.url.rstrip("/")
        self.redis = redis
        self.counts = counts if counts is not None else Counts()  # where this process counts (relay.storage.tally)
        self.http = requests.Session()
        self._jwt: str | None = None
        self._jwt_expires = 0.0
        self._lock = threading.Lock()
        self._names_paused_until = 0.0

    def _exchange(self) -> str:
        duration = int(self.config.jwt_duration)
        try:
            answer = self.http.post(
                f"{self.base}/api/auth/access-tokens/jwt",
                json={"access_token": self.config.access_token, "duration_seconds": duration},
                timeout=self.config.timeout,
            )
        except requests.RequestException as exc:
            raise CatalogUnavailable(f"token exchange failed: {type(exc).__name__}") from None
        if answer.status_code != 200:
            raise CatalogUnavailable(f"token exchange answered {answer.status_code}")
        try:
            jwt = answer.json()["jwt"]
        except (ValueError, KeyError, TypeError):
            jwt = None
        if not isinstance(jwt, str) or not jwt:
            raise CatalogUnavailable("token exchange answer has no jwt")
        self._jwt = jwt
        self._jwt_expires = time.monotonic() + duration
        self._count("exchange")
        return jwt

    def _authorization(self, renew: bool = False) -> str:
        token = self.config.access_token or ""
        if self.config.auth == "basic":
            return "Basic " + base64.b64encode(f"platform:{token}".encode()).decode()
        with self._lock:
            left = self._jwt_expires - time.monotonic()
            if renew or self._jwt is None or left < self.config.jwt_duration * REFRESH_MARGIN:
                self._exchange()
            return f"Bearer {self._jwt}"

    def _get(self, path: str, timeout: float | None = None) -> dict[str, Any] | None:
        """GET a catalog path: the JSON object, None on 404; one new exchange on a 401."""
        for attempt in (0, 1):
            try:
                answer = self.http.get(
                    f"{self.base}{path}",
                    headers={"Authorization": self._authorization(renew=attempt == 1), "Accept": "application/json"},
                    timeout=timeout or self.config.timeout,
                )
            except requests.RequestException as exc:
                raise CatalogUnavailable(f"catalog request failed: {type(exc).__name__}") from None
            if answer.status_code == 401 and attempt == 0 and self.config.auth == "bearer":
                continue  # the JWT expired early or was revoked: exchange once more
            if answer.status_code == 404:
                return None
            if answer.status_code != 200:
                raise CatalogUnavailable(f"catalog answered {answer.status_code}")
            try:
                data = answer.json()
            except ValueError:
                raise CatalogUnavailable("catalog answer is not JSON") from None
            return data if isinstance(data, dict) else None
        raise CatalogUnavailable("catalog refused the credentials")

    def entity(self, ref: EntityRef, timeout: float | None = None) -> dict[str, Any] | None:
        parts = (ref.kind, ref.namespace, ref.name)
        # One path segment each, every reserved character percent-encoded (no `/`, `?`, `#`, `%` left); a dot
        # segment is never sent (EntityRef.parse refuses it), so the path cannot leave the entity path.
        if any(p in DOT_SEGMENTS or not p for p in parts):
            return None
        return self._get("/api/catalog/entities/by-name/" + "/".join(quote(p, safe="") for p in parts), timeout)

    def emails(self, ref_text: str) -> list[str]:
        """The e-mails behind a reference: a user's one, or a group's members'; [] when none is known."""
        ref = EntityRef.parse(ref_text)
        if ref is None:
            return []
        key = f"{PREFIX}catalog:{ref}"
        cached = self._cached(key)
        if cached is not None:
            return [e for e in json.loads(cached) if isinstance(e, str)]
        found = self._resolve(ref)
        self._keep(key, json.dumps(found), bool(found))
        return found

    def _resolve(self, ref: EntityRef) -> list[str]:
        entity = self.entity(ref)
        if entity is None:
            self._count("not_found")
            return []
        self._count("fetched")
        name = entity_display_name(entity)
        self._keep(_name_key(ref), name or "", bool(name))  # the same answer: no second fetch for the name
        if ref.kind == "group":
            found: list[str] = []
            for member in member_refs(entity):
                member_ref = EntityRef.parse(member)
                if member_ref is None or member_ref.kind != "user":
                    continue
                for email in self.emails(str(member_ref)):
                    if email.lower() not in {f.lower() for f in found}:
                        found.append(email)
            return found
        own = entity_email(entity)
        return [own] if own else []

    def display_name(self, ref_text: str) -> str | None:
        """None when it has none; cached like e-mails. CatalogUnavailable for NAME_PAUSE after one unanswered in
        NAME_TIMEOUT: a page or a message waits on no platform that is down."""
        ref = EntityRef.parse(ref_text)
        if ref is None:
            return None
        cached = self._cached(_name_key(ref))
        if cached is not None:
            return cached or None  # "": the catalog has no name for it
        if time.monotonic() < self._names_paused_until:
            raise CatalogUnavailable("the platform failed a moment ago")
        try:
            entity = self.entity(ref, min(NAME_TIMEOUT, self.config.timeout))
        except CatalogUnavailable:
            self._names_paused_until = time.monotonic() + NAME_PAUSE
            raise
        self._count("fetched" if entity is not None else "not_found")
        name = entity_display_name(entity) if entity is not None else None
        self._keep(_name_key(ref), name or "", bool(name))
        return name

    def _cached(self, key: str) -> str | None:
        """A cached answer (counted as a hit); None when there is none or Redis did not answer."""
        try:
            cached = self.redis.get(key)
        except RedisError:
            return None
        if cached is None:
            return None
        self._count("cache_hit")
        return cached.decode() if isinstance(cached, bytes) else str(cached)

    def _keep(self, key: str, value: str, found: bool) -> None:
        """An answer cached for `cache_ttl`; one that found nothing for NEGATIVE_TTL at most."""
        ttl = self.config.cache_ttl if found else min(NEGATIVE_TTL, self.config.cache_ttl)
        with contextlib.suppress(RedisError):
            self.redis.set(key, value, ex=max(1, int(ttl)))

    def _count(self, result: str) -> None:
        field = metric_field("relay_catalog_lookups_total", result=result)
        with contextlib.suppress(RedisError):
            self.redis.hincrby(self.counts.key, field, 1)


def _name_key(ref: EntityRef) -> str:
    # Hashed: the parts come from payloads (STYLE.md, "Keys built from payload values are hashed or escaped").
    return f"{PREFIX}catalog:name:" + hashlib.sha256(str(ref).encode()).hexdigest()[:32]
