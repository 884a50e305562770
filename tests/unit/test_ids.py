"""Aggregate ids are uuid5 under the ledger's namespace, as they were first recorded."""

from __future__ import annotations

import uuid

import pytest

from ledger.aggregates import ids


@pytest.mark.parametrize("name", ["", "request/r-1", "table/Café 1", "account/\u2660\U0001f0a1"])
def test_an_id_is_the_standard_uuid5_of_its_name(name: str) -> None:
    assert ids._uuid5(name) == uuid.uuid5(ids.NAMESPACE, name)


def test_each_kind_of_id_names_its_kind() -> None:
    table = uuid.UUID(int=1)
    assert ids.receipt_id("r-1") == uuid.uuid5(ids.NAMESPACE, "request/r-1")
    assert ids.round_id(table, 3) == uuid.uuid5(ids.NAMESPACE, f"round/{table}/3")
    assert ids.house_id(table) == uuid.uuid5(ids.NAMESPACE, f"house/{table}")
