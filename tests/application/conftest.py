"""The GameLedger contract suite runs on the in-memory store and on PostgreSQL.

Each PostgreSQL ledger gets a schema of its own in the session's database, so
tests never see each other's events (and worked cases can name players P1, P2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ledger.application import GameLedger
from ledger.rules import RuleSet, TableLimits
from ledger.sealing import ShoeSealer
from tests.scripted import LedgerScripted, SteeredShuffle

MakeLedger = Callable[..., GameLedger]


@pytest.fixture(params=["memory", "postgres"])
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_ledger(request: pytest.FixtureRequest, store: str) -> Iterator[MakeLedger]:
    """Build GameLedgers on the chosen store, each with storage of its own."""
    made: list[GameLedger] = []

    def make(randbelow: Any = None, *, shoe_key: bytes | None = None) -> GameLedger:
        if store == "memory":
            env = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
        else:
            env = request.getfixturevalue("postgres_env")()
        kwargs = {"randbelow": randbelow} if randbelow is not None else {}
        ledger = GameLedger(env=env, shoe_key=shoe_key or ShoeSealer.new_key(), **kwargs)
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        ledger.close()


@pytest.fixture
def play(make_ledger: MakeLedger) -> Callable[..., LedgerScripted]:
    """Start a worked case at a fresh table of a fresh ledger, its shoe steered to ``cards``.

    A shoe holds the preset's wild cards; a case that needs more (case 18 deals two)
    plays under the same rules with enough wild cards in the shoe.
    """
    def start(rules: RuleSet, cards: str, limits: TableLimits | None = None) -> LedgerScripted:
        wild = cards.split().count("W")
        if wild > rules.wild_cards:
            rules = rules.evolve(name=f"{rules.name}, {wild} wild cards", wild_cards=wild)
        return LedgerScripted(make_ledger(SteeredShuffle(cards)), rules, limits)

    return start
