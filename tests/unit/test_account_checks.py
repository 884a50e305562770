"""R-M3 on an account, where chips are written (``post``) and where they are read (every
event's ``apply``): a player's balances are never negative, and the house holds nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from uuid import UUID

import pytest

from ledger.aggregates.account import HOUSE, PLAYER, Account
from ledger.errors import InsufficientChips, InvariantBroken

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ROUND = UUID(int=7)


def _account(kind: str, available: int = 0) -> Account:
    account = Account._create(Account.Created, id=UUID(int=1), timestamp=NOW, owner="P1",
                              kind=kind, currency="EUR", actor="cashier", request_id="r-1")
    if available:
        account.buy_in(available, "cashier", "r-2", NOW)
    return account


def _forged_posting(account: Account, held_delta: int, available_delta: int) -> None:
    """A posting as a stored event says it, around ``post`` (as an altered record would)."""
    account.trigger_event(Account.Posted, round_id=ROUND, held_delta=held_delta,
                          available_delta=available_delta, memo="", actor="dealer",
                          request_id="r-9", timestamp=NOW)


def test_a_stake_is_held_and_released_within_the_balance() -> None:
    player = _account(PLAYER, 100)
    player.post(ROUND, 30, -30, "", "dealer", "r-3", NOW)
    player.post(ROUND, -30, 60, "", "dealer", "r-4", NOW)
    assert (player.available, player.held) == (130, 0)


def test_a_posting_that_overdraws_a_player_is_refused_and_records_nothing() -> None:
    player = _account(PLAYER, 100)
    with pytest.raises(InsufficientChips, match="fewer chips available than the 101"):
        player.post(ROUND, 101, -101, "", "dealer", "r-3", NOW)
    assert (player.available, player.held, player.version) == (100, 0, 2)


@pytest.mark.parametrize(("kind", "held_delta", "said"), [
    (PLAYER, -1, "would release chips P1 does not hold"),
    (HOUSE, 5, "would hold chips on house account P1"),
    (HOUSE, -5, "would hold chips on house account P1"),
])
def test_a_posting_releasing_chips_not_held_or_holding_on_the_house_is_refused(
        kind: str, held_delta: int, said: str) -> None:
    account = _account(kind, 100)
    with pytest.raises(InvariantBroken, match=said):
        account.post(ROUND, held_delta, -held_delta, "", "dealer", "r-3", NOW)
    assert account.version == 2


@pytest.mark.parametrize(("kind", "held_delta", "available_delta", "said"), [
    (PLAYER, -1, 1, "account P1 has a negative balance (available 101, held -1)"),
    (PLAYER, 0, -101, "account P1 has a negative balance (available -1, held 0)"),
    (HOUSE, 5, -5, "house account P1 holds chips"),
])
def test_a_stored_posting_that_breaks_r_m3_is_refused_when_read(
        kind: str, held_delta: int, available_delta: int, said: str) -> None:
    account = _account(kind, 100)
    with pytest.raises(InvariantBroken, match=re.escape(said)):
        _forged_posting(account, held_delta, available_delta)


def test_the_house_may_go_below_zero_paying_out() -> None:
    house = _account(HOUSE)
    house.post(ROUND, 0, -500, "", "dealer", "r-3", NOW)
    _forged_posting(house, 0, -500)
    assert house.available == -1000
