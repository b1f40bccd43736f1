"""What a per-recipient delivery with no address becomes once the platform catalog has answered."""

from __future__ import annotations

from dataclasses import dataclass


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
    """The channels a given-up delivery falls back to: its route's `fallback:` ones that still exist; a
    fallback delivery never falls back again."""
    if is_fallback:
        return []
    return [name for name in fallback if name in configured]
