"""Who a message is for: its recipient type, and each recipient's reference and e-mail address."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# A deliberately narrow address grammar: it ends up inside an Apprise URL, so nothing that could
# add a target, a parameter or a host may pass (no '?', '&', '/', ',', spaces, quotes or schemes).
_LOCAL = r"[A-Za-z0-9!#$%*+=^_`{|}~-]+(?:\.[A-Za-z0-9!#$%*+=^_`{|}~-]+)*"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
_EMAIL = re.compile(rf"{_LOCAL}@{_DOMAIN}")
MAX_EMAIL_LENGTH = 254


def user_field(recipient: dict[str, Any], dotted: str) -> Any:
    """A resolved user field, read flat (`{"spec.email": ...}`) or nested (`{"spec": {"email": ...}}`)."""
    if dotted in recipient and recipient[dotted] is not None:
        return recipient[dotted]
    node: Any = recipient
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def valid_email(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_EMAIL_LENGTH and _EMAIL.fullmatch(value) is not None


def email_of(recipient: dict[str, Any]) -> str | None:
    """The recipient's e-mail: `spec.email`, Backstage's `spec.profile.email`, or a plain `email`."""
    for dotted in ("spec.email", "spec.profile.email", "email"):
        value = user_field(recipient, dotted)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def reference_of(recipient: dict[str, Any]) -> str | None:
    ref = recipient.get("userRef")
    if isinstance(ref, str) and ref:
        return ref
    name = user_field(recipient, "metadata.name")
    return name if isinstance(name, str) and name else None


def catalog_ref(recipient: dict[str, Any]) -> str | None:
    """An entity reference the platform catalog can resolve: `userRef`, else kind + `metadata.name`."""
    ref = recipient.get("userRef")
    if isinstance(ref, str) and ":" in ref and ref.split(":", 1)[1]:
        return ref
    name = user_field(recipient, "metadata.name")
    kind = recipient.get("kind")
    if isinstance(name, str) and name and "/" not in name and ":" not in name:
        return f"{kind.lower() if isinstance(kind, str) and kind else 'user'}:default/{name}"
    return None


# A v2 type as the platform reports it in the legacy `recipientType` (seed 002, "Webhook notifications").
REPORTED_AS = {"recipient-type:project-data-access-manager": "recipient-type:system-owner"}


def resolve_recipient_type(legacy: str | None, v2: str | None, is_routed: Callable[[str], bool]) -> str | None:
    """v2 when present and routed, else legacy when routed, else (the default route) v2, else legacy."""
    candidates = list(dict.fromkeys(t for t in (v2, legacy) if isinstance(t, str) and t))
    return next((t for t in candidates if is_routed(t)), candidates[0] if candidates else None)
