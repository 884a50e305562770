"""Deterministic aggregate ids (uuid5 under one namespace), so ids follow from names."""

from __future__ import annotations

import hashlib
from uuid import UUID

NAMESPACE = UUID("6f1c9a52-3c1e-4f0e-9a51-2b1f6a0d7e11")
_NAMESPACE_BYTES = NAMESPACE.bytes


def _uuid5(name: str) -> UUID:
    """``uuid.uuid5(NAMESPACE, name)``, without what it repeats on every call (importing
    hashlib, the namespace's bytes): every command makes one, for its receipt."""
    return UUID(bytes=hashlib.sha1(_NAMESPACE_BYTES + name.encode()).digest()[:16], version=5)


def table_id(name: str) -> UUID:
    return _uuid5(f"table/{name}")


def round_id(table: UUID, round_no: int) -> UUID:
    return _uuid5(f"round/{table}/{round_no}")


def shoe_id(table: UUID, shoe_no: int) -> UUID:
    return _uuid5(f"shoe/{table}/{shoe_no}")


def account_id(player: str) -> UUID:
    return _uuid5(f"account/{player}")


def house_id(table: UUID) -> UUID:
    return _uuid5(f"house/{table}")


def receipt_id(request_id: str) -> UUID:
    return _uuid5(f"request/{request_id}")


def rule_set_id(name: str, version: int) -> UUID:
    return _uuid5(f"rules/{version}/{name}")
