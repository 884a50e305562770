"""The bounded map of recent items a ledger process keeps (shoe orders, receipts)."""

from __future__ import annotations

import pytest

from ledger.recent import Recent


def test_the_least_recently_used_item_goes_first_and_a_read_counts_as_a_use() -> None:
    recent: Recent[str, int] = Recent(3)
    for n, key in enumerate("abc"):
        recent.put(key, n)
    assert recent.get("a") == 0  # now the most recently used
    recent.put("d", 3)  # one too many: "b" goes
    assert [recent.get(k) for k in "abcd"] == [0, None, 2, 3]
    recent.put("c", 20)  # put again: replaced, and the most recent
    recent.put("e", 4)
    assert [recent.get(k) for k in "acde"] == [None, 20, 3, 4]
    assert len(recent) == 3
    recent.pop("c")
    recent.pop("never there")
    assert (recent.get("c"), len(recent)) == (None, 2)


def test_a_map_of_recent_items_holds_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Recent(0)
