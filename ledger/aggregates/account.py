"""Chip accounts: one per player, one per table for the house (R-M1, R-M3, R-M4).

A player's chips are ``available`` or ``held`` (stakes placed and not yet settled).
Buy-ins and cash-outs are the only flows in and out of the ledger; every other
movement is a :class:`Account.Posted` that belongs to one round command and, over
all accounts that command touches, sums to zero.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.aggregates.snapshot import LedgerSnapshot
from ledger.errors import BetRefused, InsufficientChips, InvariantBroken
from ledger.rules import AMOUNT_MAX

PLAYER = "player"
HOUSE = "house"
ACCOUNT_KINDS = (PLAYER, HOUSE)


class Account(Aggregate):
    TOPIC = "pitboss:Account"
    Snapshot = LedgerSnapshot

    class Created(Aggregate.Created):
        """An account opened: a player's (``owner`` is the player id) or a table's house."""

        TOPIC = "pitboss:Account.Created"
        owner: str
        kind: str
        currency: str
        actor: str
        request_id: str

    class BoughtIn(Aggregate.Event):
        """Chips bought at the cashier's desk."""

        TOPIC = "pitboss:Account.BoughtIn"
        amount: int
        actor: str
        request_id: str

        def apply(self, account: Account) -> None:
            account.available += self.amount
            account.bought_in += self.amount

    class CashedOut(Aggregate.Event):
        """Chips exchanged back at the cashier's desk."""

        TOPIC = "pitboss:Account.CashedOut"
        amount: int
        actor: str
        request_id: str

        def apply(self, account: Account) -> None:
            account.available -= self.amount
            account.cashed_out += self.amount
            account.check()

    class Posted(Aggregate.Event):
        """A round moved chips: ``held_delta`` and ``available_delta`` change the balances."""

        TOPIC = "pitboss:Account.Posted"
        round_id: UUID
        held_delta: int
        available_delta: int
        memo: str
        actor: str
        request_id: str

        def apply(self, account: Account) -> None:
            account.held += self.held_delta
            account.available += self.available_delta
            account.check()

    def __init__(self, owner: str, kind: str, currency: str, actor: str,
                 request_id: str) -> None:
        self.owner = owner
        self.kind = kind
        self.currency = currency
        self.available = 0
        self.held = 0
        self.bought_in = 0
        self.cashed_out = 0

    @property
    def total(self) -> int:
        return self.available + self.held

    def check(self) -> None:
        """R-M3, read side: a player's balances are never negative; the house holds nothing."""
        if self.held < 0 or (self.kind == PLAYER and self.available < 0):
            raise InvariantBroken(f"account {self.owner} has a negative balance "
                                  f"(available {self.available}, held {self.held})")
        if self.kind == HOUSE and self.held:
            raise InvariantBroken(f"house account {self.owner} holds chips")

    def buy_in(self, amount: int, actor: str, request_id: str, now: datetime) -> None:
        _check_amount(amount)
        self.trigger_event(self.BoughtIn, amount=amount, actor=actor, request_id=request_id,
                           timestamp=now)

    def cash_out(self, amount: int, actor: str, request_id: str, now: datetime) -> None:
        _check_amount(amount)
        if amount > self.available:
            raise InsufficientChips(f"{self.owner} has {self.available} available, less than "
                                    f"the {amount} asked for.", "R-M3")
        self.trigger_event(self.CashedOut, amount=amount, actor=actor, request_id=request_id,
                           timestamp=now)

    def post(self, round_id: UUID, held_delta: int, available_delta: int, memo: str,
             actor: str, request_id: str, now: datetime) -> None:
        """R-M3, write side: refuse a movement that would overdraw a player."""
        if self.kind == PLAYER and self.available + available_delta < 0:
            # Said at the table, to a dealer who may not read balances: no balance in it.
            raise InsufficientChips(f"{self.owner} has fewer chips available than the "
                                    f"{-available_delta} this needs.", "R-M3")
        if self.kind == HOUSE and held_delta:
            raise InvariantBroken(f"a posting would hold chips on house account {self.owner}, "
                                  "which holds none")
        if self.held + held_delta < 0:
            raise InvariantBroken(f"a posting would release chips {self.owner} does not hold")
        self.trigger_event(self.Posted, round_id=round_id, held_delta=held_delta,
                           available_delta=available_delta, memo=memo, actor=actor,
                           request_id=request_id, timestamp=now)

    def summary(self) -> dict[str, Any]:
        return {"owner": self.owner, "kind": self.kind, "currency": self.currency,
                "available": self.available, "held": self.held, "total": self.total,
                "version": self.version}


def _check_amount(amount: int) -> None:
    if type(amount) is not int or not 0 < amount <= AMOUNT_MAX:
        raise BetRefused(f"An amount is a whole number of minor units from 1 to {AMOUNT_MAX}.",
                         "R-M1")
