"""Deterministic aggregate ids (uuid5 under one namespace), so ids follow from names."""

from __future__ import annotations

from uuid import UUID, uuid5

NAMESPACE = UUID("6f1c9a52-3c1e-4f0e-9a51-2b1f6a0d7e11")


def table_id(name: str) -> UUID:
    return uuid5(NAMESPACE, f"table/{name}")


def round_id(table: UUID, round_no: int) -> UUID:
    return uuid5(NAMESPACE, f"round/{table}/{round_no}")


def shoe_id(table: UUID, shoe_no: int) -> UUID:
    return uuid5(NAMESPACE, f"shoe/{table}/{shoe_no}")


def account_id(player: str) -> UUID:
    return uuid5(NAMESPACE, f"account/{player}")


def house_id(table: UUID) -> UUID:
    return uuid5(NAMESPACE, f"house/{table}")


def receipt_id(request_id: str) -> UUID:
    return uuid5(NAMESPACE, f"request/{request_id}")


def rule_set_id(name: str, version: int) -> UUID:
    return uuid5(NAMESPACE, f"rules/{version}/{name}")
