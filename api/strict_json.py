"""JSON read strictly: each member of an object given once (Python's reader keeps the last of
two silently), for request bodies and key files alike; and, for request bodies, no NaN or
Infinity (which Python's reader takes, and JSON has not)."""

from __future__ import annotations

from typing import Any


class RepeatedMember(ValueError):
    """An object names a member twice; its argument is the name."""


class NotJson(ValueError):
    """A constant JSON has not (NaN, Infinity, -Infinity); its argument is the constant."""


def members_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: RepeatedMember for a member named twice."""
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise RepeatedMember(name)
        members[name] = value
    return members


def no_constant(name: str) -> Any:
    """``json.loads``'s ``parse_constant``: NotJson for NaN, Infinity and -Infinity."""
    raise NotJson(name)
