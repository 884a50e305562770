"""Accounts (role ``cashier``): open an account, buy in, cash out, balance and statement."""

from __future__ import annotations

import re
from typing import Any

from api.auth import AUDITOR, CASHIER, MANAGER
from api.schemas import (
    NOT_A_PLAYER_ID,
    PLAYER_IN_PATH,
    PLAYER_PATTERN,
    AccountSchema,
    AmountSchema,
    EntriesPageSchema,
    EntriesQuerySchema,
    OpenAccountSchema,
)
from api.services import ledger
from api.views import Blueprint, actor, guard
from ledger.errors import NameRefused

blp = Blueprint("accounts", __name__, description="Player accounts (cashier).")

READERS = (CASHIER, MANAGER, AUDITOR)


@blp.route("/accounts", methods=["POST"])
@guard(blp, CASHIER, mutating=True)
@blp.arguments(OpenAccountSchema())
@blp.response(201, AccountSchema)
def open_account(body: dict[str, Any], request_id: str) -> dict[str, Any]:
    """Open a player's chip account (R-M3)."""
    led = ledger()
    led.open_account(request_id, actor(), body["player"], body["currency"])
    return led.balance(body["player"])


@blp.route("/accounts/<player>/buy-in", methods=["POST"], parameters=[PLAYER_IN_PATH])
@guard(blp, CASHIER, mutating=True)
@blp.arguments(AmountSchema())
@blp.response(200, AccountSchema)
def buy_in(body: dict[str, Any], player: str, request_id: str) -> dict[str, Any]:
    """Chips bought at the cashier's desk."""
    return ledger().buy_in(request_id, actor(), player_id(player), body["amount"])


@blp.route("/accounts/<player>/cash-out", methods=["POST"], parameters=[PLAYER_IN_PATH])
@guard(blp, CASHIER, mutating=True)
@blp.arguments(AmountSchema())
@blp.response(200, AccountSchema)
def cash_out(body: dict[str, Any], player: str, request_id: str) -> dict[str, Any]:
    """Chips exchanged back; never more than available (R-M3)."""
    return ledger().cash_out(request_id, actor(), player_id(player), body["amount"])


@blp.route("/accounts/<player>", methods=["GET"], parameters=[PLAYER_IN_PATH])
@guard(blp, *READERS)
@blp.response(200, AccountSchema)
def balance(player: str) -> dict[str, Any]:
    """A player's balance: available, held (stakes in play) and total."""
    return ledger().balance(player_id(player))


@blp.route("/accounts/<player>/entries", methods=["GET"], parameters=[PLAYER_IN_PATH])
@guard(blp, *READERS)
@blp.arguments(EntriesQuerySchema(), location="query", unknown="raise")
@blp.response(200, EntriesPageSchema)
def statement(query: dict[str, Any], player: str) -> dict[str, Any]:
    """A player's statement: every entry of the account in order, a page at a time."""
    return ledger().account_entries(player_id(player), after=query["after"], limit=query["limit"])


def player_id(player: str) -> str:
    """The player named in a path, refused as one named in a body is: accounts are opened
    with ids of that form only, and "Player é has no account; the cashier opens one." sent
    the cashier to a refusal."""
    if re.fullmatch(PLAYER_PATTERN, player) is None:
        raise NameRefused(NOT_A_PLAYER_ID, field="player")  # RULES.md has no rule on names
    return player
