"""What a per-recipient delivery with no address becomes once the platform catalog has answered."""

from __future__ import annotations

from dataclasses import dataclass

# Path segments an HTTP client normalises away (RFC 3986, "Remove Dot Segments"): `user:../..` would make
# relay GET a platform path outside the catalog's entities, with its bearer JWT.
DOT_SEGMENTS = frozenset({".", ".."})


def split_ref(ref: str) -> tuple[str, str, str] | None:
    """An entity reference's kind, namespace (`default` when none) and name; None without a kind or a name."""
    if ":" not in ref:
        return None
    kind, _, rest = ref.partition(":")
    namespace, _, name = rest.rpartition("/")
    if not kind or not name:
        return None
    return kind.lower(), namespace or "default", name


def unusable_ref(ref: str) -> str | None:
    """Why it must not be looked up (None: it may be): `.` and `..` would climb out of the entity path."""
    for label, part in zip(("kind", "namespace", "name"), split_ref(ref) or (), strict=False):
        if part in DOT_SEGMENTS:
            return f"recipient reference {ref!r} not looked up in the platform catalog: its {label} is {part!r}"
    return None


@dataclass(frozen=True)
class SendTo:
    address: str


@dataclass(frozen=True)
class Expand:
    """A group: one delivery per member address."""

    addresses: tuple[str, ...]


@dataclass(frozen=True)
class Skip:
    reason: str


def after_look_up(ref: str, emails: list[str]) -> SendTo | Expand | Skip:
    """A user reference goes to its first address; a group to all of its members; nothing known: skipped."""
    if ref.lower().startswith("group:"):
        if not emails:
            return Skip(f"group {ref} has no member with an e-mail address in the platform catalog")
        unique: dict[str, str] = {}
        for email in emails:
            unique.setdefault(email.lower(), email)  # one delivery per address, whatever its case
        return Expand(tuple(unique.values()))
    if not emails:
        return Skip(f"no e-mail address for {ref} in the platform catalog")
    return SendTo(emails[0])


def fallback_channels(fallback: list[str], is_fallback: bool, configured: set[str]) -> list[str]:
    """Its route's `fallback:` channels that still exist, for a given-up delivery that is no fallback itself."""
    if is_fallback:
        return []
    return [name for name in fallback if name in configured]
