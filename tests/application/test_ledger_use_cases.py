"""GameLedger use cases on both stores: money, refusals, idempotency, voids, rules, shoes."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import logging
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any
from uuid import UUID

import pytest

from ledger.aggregates import ids
from ledger.aggregates.account import Account
from ledger.aggregates.receipt import Receipt
from ledger.aggregates.round import Round
from ledger.aggregates.shoe import ShoeRecord
from ledger.aggregates.table import Table
from ledger.application import GameLedger
from ledger.engine import facts as f
from ledger.engine.machine import BETTING_CHANGES_MAX
from ledger.engine.readjudicate import readjudicate
from ledger.errors import (
    AccountExists,
    BetRefused,
    CurrencyRefused,
    DecisionRefused,
    InsufficientChips,
    LedgerError,
    NameRefused,
    NotFound,
    NotYourTurn,
    RequestIdReused,
    RoundClosed,
    RoundInPlay,
    RuleSetInvalid,
    StaleVersion,
    TableExists,
    TableOpen,
)
from ledger.money import CURRENCIES
from ledger.rules import CASINO, CASINO_WILD, WILD21, TableLimits
from ledger.sealing import ShoeSealer
from ledger.shoe import verify_commitment
from tests.scripted import SteeredShuffle

MakeLedger = Callable[..., GameLedger]


class Desk:
    """A table with funded players, and request ids that never repeat."""

    def __init__(self, app: GameLedger, cards: str = "", rules: Any = CASINO,
                 players: tuple[str, ...] = ("P1", "P2"), chips: int = 1000) -> None:
        self.app = app
        self._ids = count(1)
        self.table = app.open_table(self.rid(), "boss", "T1", rules)
        for player in players:
            app.open_account(self.rid(), "cashier", player)
            app.buy_in(self.rid(), "cashier", player, chips)

    def rid(self) -> str:
        return f"req-{next(self._ids)}"

    def round(self) -> UUID:
        return self.app.start_round(self.rid(), "dealer", self.table)

    def do(self, use_case: str, *args: Any) -> dict[str, Any]:
        result: dict[str, Any] = getattr(self.app, use_case)(self.rid(), "dealer", *args)
        return result

    def stood_round(self, *amounts: int) -> UUID:
        """A round in which P1, P2 … stake ``amounts`` on boxes 1, 2 …, stand, and settle."""
        r = self.round()
        boxes = list(enumerate(amounts, 1))
        for box, amount in boxes:
            self.do("place_stake", r, f"P{box}", box, amount)
        self.do("deal", r)
        for box, _ in boxes:
            self.do("stand", r, f"P{box}", box, 0)
        self.do("play_dealer", r)
        self.do("settle", r)
        return r

    def money(self) -> dict[str, tuple[int, int]]:
        return {p: (self.app.balance(p)["available"], self.app.balance(p)["held"])
                for p in ("P1", "P2")}


def unchanged(app: GameLedger, attempt: Callable[[], object], error: type[LedgerError],
              rule: str) -> LedgerError:
    """The attempt is refused with ``error`` citing ``rule`` and stores no event."""
    before = app.recorder.max_notification_id()
    with pytest.raises(error) as refused:
        attempt()
    assert refused.value.rule == rule
    assert app.recorder.max_notification_id() == before
    return refused.value


def test_a_stake_is_held_and_its_settlement_posted(make_ledger: MakeLedger) -> None:
    # P1 19 vs dealer 18 on box 1; P2 17 loses on box 2.
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    r = desk.round()
    desk.do("place_stake", r, "P1", 1, 100)
    desk.do("place_stake", r, "P2", 2, 50)
    assert desk.money() == {"P1": (900, 100), "P2": (950, 50)}
    desk.do("deal", r)
    desk.do("stand", r, "P1", 1, 0)
    desk.do("stand", r, "P2", 2, 0)
    desk.do("play_dealer", r)
    desk.do("settle", r)
    assert desk.money() == {"P1": (1100, 0), "P2": (950, 0)}
    assert desk.app.house(desk.table)["available"] == -50
    assert desk.app.check_round(r) == []


def test_refusals_are_typed_and_store_nothing(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger(SteeredShuffle("TS TH 9D 5S 7C")), chips=500)
    app, r = desk.app, desk.round()
    unchanged(app, lambda: desk.do("place_stake", r, "P1", 1, 600), InsufficientChips, "R-M3")
    unchanged(app, lambda: desk.do("place_stake", r, "P1", 1, 5), BetRefused, "R-C8")
    desk.do("place_stake", r, "P1", 1, 400)
    unchanged(app, lambda: desk.do("place_stake", r, "P2", 1, 650), BetRefused, "R-C8")
    unchanged(app, lambda: desk.do("place_stake", r, "nobody", 2, 10), NotFound, "R-M3")
    desk.do("place_stake", r, "P2", 2, 10)
    desk.do("deal", r)
    unchanged(app, lambda: desk.do("hit", r, "P2", 2, 0), NotYourTurn, "R-C3")
    desk.do("hit", r, "P1", 1, 0)
    unchanged(app, lambda: desk.do("surrender", r, "P2", 2), DecisionRefused, "R-X3")
    # What comes next at the table waits for the round; a table's name is its own.
    in_play = unchanged(app, lambda: desk.round(), RoundInPlay, "R-V1")
    # Said to a dealer, who cannot void: what each of them does.
    assert in_play.message.endswith("is still in play (playing): its hands are played, then "
                                    "the dealer plays and settles it, or a manager voids it.")
    unchanged(app, lambda: app.close_table(desk.rid(), "boss", desk.table, "shift end"),
              RoundInPlay, "R-V1")
    # No rule of RULES.md is about a table's name or its opening: none is cited.
    taken = unchanged(app, lambda: app.open_table(desk.rid(), "boss", "T1", CASINO),
                      TableExists, "")
    assert taken.field == "name"  # it names what is at fault instead
    unchanged(app, lambda: app.reopen_table(desk.rid(), "boss", desk.table), TableOpen, "")


def test_a_settled_or_voided_round_takes_no_decision(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    r = desk.round()
    desk.do("place_stake", r, "P1", 1, 10)
    desk.do("place_stake", r, "P2", 2, 10)
    desk.do("deal", r)
    desk.do("void", r, "dealer misdealt")
    unchanged(desk.app, lambda: desk.do("stand", r, "P1", 1, 0), RoundClosed, "R-V1")
    r2 = desk.stood_round(10, 10)
    unchanged(desk.app, lambda: desk.do("hit", r2, "P1", 1, 0), RoundClosed, "R-V2")


def test_a_repeated_request_returns_the_first_result_and_moves_no_money(
        make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app, r = desk.app, desk.round()
    first = app.place_stake("same-key", "dealer", r, "P1", 1, 100)
    events = app.recorder.max_notification_id()
    again = app.place_stake("same-key", "dealer", r, "P1", 1, 100)
    assert again == first
    assert app.recorder.max_notification_id() == events
    assert app.balance("P1")["held"] == 100
    assert app.buy_in("cash-1", "cashier", "P2", 50) == app.buy_in("cash-1", "cashier", "P2", 50)
    assert app.balance("P2")["available"] == 1050
    # The same request from another key holder is not a repeat: the first one's answer is
    # not theirs, and nothing moves again.
    refused = unchanged(app, lambda: app.buy_in("cash-1", "cashier-2", "P2", 50),
                        RequestIdReused, "R-M4")
    assert "by another key holder" in str(refused)
    assert app.balance("P2")["available"] == 1050


def test_an_opening_repeated_after_a_check_came_in_is_answered_not_refused(
        make_ledger: MakeLedger, monkeypatch: pytest.MonkeyPatch) -> None:
    # A table and an account opened in a code an earlier version took; a terminal's retry
    # with the same request id, after the upgrade, was refused by the new check before its
    # receipt was looked for.
    app = make_ledger()
    # Names too: one written otherwise than in composed form (NFC), before that was checked.
    monkeypatch.setattr("ledger.application.CURRENCIES", CURRENCIES | {"ABC"})  # earlier
    monkeypatch.setattr("ledger.application.check_new_name", lambda *_: None)
    monkeypatch.setattr("ledger.application.check_new_player_id", lambda *_: None)
    # And a table where no round could be dealt (R-C8), as once allowed.
    monkeypatch.setattr("ledger.application._check_dealable", lambda *_: None)
    table = app.open_table("t-abc", "manager", "Old", CASINO, currency="ABC")
    account = app.open_account("a-abc", "cashier", "old", currency="ABC")
    decomposed = app.open_account("a-nfd", "cashier", "Cafe\u0301")
    solo = CASINO.evolve(name="solo", bettors_per_box=1)
    one_box = app.open_table("t-one", "manager", "One", solo, TableLimits(boxes=1))
    monkeypatch.undo()  # this version
    assert app.open_table("t-abc", "manager", "Old", CASINO, currency="ABC") == table
    assert app.open_table("t-one", "manager", "One", solo, TableLimits(boxes=1)) == one_box
    unchanged(app, lambda: app.open_table("t-two", "manager", "Two", solo,
                                          TableLimits(boxes=1)), RuleSetInvalid, "R-C8")
    assert app.open_account("a-abc", "cashier", "old", currency="ABC") == account
    assert app.open_account("a-nfd", "cashier", "Cafe\u0301") == decomposed
    unchanged(app, lambda: app.open_account("a-new", "cashier", "new", currency="ABC"),
              CurrencyRefused, "R-M1")
    # A name taken is said so before the currency is looked at (it is the name that is wrong).
    unchanged(app, lambda: app.open_account("a-again", "cashier", "old", currency="EUX"),
              AccountExists, "")
    unchanged(app, lambda: app.open_table("t-again", "manager", "Old", CASINO, currency="EUX"),
              TableExists, "")


def test_a_round_still_in_play_is_said_with_what_finishes_it_in_its_phase(
        make_ledger: MakeLedger) -> None:
    # "The dealer finishes it" was said of a round in betting with no stake, which a dealer
    # cannot deal, and of one in settling, where the dealer has finished and settles.
    desk = Desk(make_ledger(SteeredShuffle("5S TH 7D 6S 9C 4H TD TC")))
    app = desk.app
    r = desk.round()
    betting = unchanged(app, lambda: desk.round(), RoundInPlay, "R-V1")
    assert "(betting): the dealer deals it once stakes are in place, or a manager" \
        in betting.message
    for bettor, box in (("P1", 1), ("P2", 2)):
        desk.do("place_stake", r, bettor, box, 100)
    desk.do("deal", r)
    desk.do("stand", r, "P1", 1)
    desk.do("stand", r, "P2", 2)
    desk.do("play_dealer", r)
    settling = unchanged(app, lambda: desk.round(), RoundInPlay, "R-V1")
    assert "(settling): the dealer settles it, or a manager voids it." in settling.message
    desk.do("settle", r)
    # One that took all the stakes placed and withdrawn it may, with none left: a void only.
    spent = desk.round()
    for _ in range(BETTING_CHANGES_MAX // 2):
        desk.do("place_stake", spent, "P1", 1, 100)
        desk.do("withdraw_stake", spent, "P1", 1)
    capped = unchanged(app, lambda: desk.round(), RoundInPlay, "R-V1")
    assert capped.message.endswith("(betting): a manager voids it (it takes no more stakes "
                                   "placed or withdrawn, and has none to deal).")


def test_a_decision_naming_the_version_it_was_shown_acts_on_exactly_that_version(
        make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger(SteeredShuffle("5S TH 7D 6S 9C 4H")))
    app, r = desk.app, desk.round()
    shown = app.round_state(r)["version"]
    desk.do("place_stake", r, "P1", 1, 10)  # another terminal's stake moves the round on
    refused = unchanged(app, lambda: app.place_stake("late", "dealer", r, "P2", 2, 10,
                                                      expected=shown),
                        StaleVersion, "")
    assert isinstance(refused, StaleVersion)  # narrows the type; unchanged() checked it
    assert (refused.seen, refused.now) == (shown, app.round_state(r)["version"])
    assert (refused.seen, refused.now) == (shown, shown + 1)
    assert app.balance("P2")["held"] == 0
    now = app.round_state(r)["version"]
    result = app.place_stake("on-time", "dealer", r, "P2", 2, 10, expected=now)
    assert result["version"] > now
    # A repeat answers with the first result, whatever version it names.
    assert app.place_stake("on-time", "dealer", r, "P2", 2, 10, expected=now) == result
    assert app.balance("P2")["held"] == 10
    desk.do("deal", r)
    state = app.round_state(r)
    after = app.hit("hit", "dealer", r, "P1", 1, 0, expected=state["version"])
    assert app.round_state(r, after["version"]) == app.round_state(r)
    assert app.round_state(r)["boxes"][0]["hands"][0]["cards"] == ["5S", "6S", "4H"]
    bad: Any  # what a careless caller might pass
    for bad in (0, -1, True, "3"):
        stand: Callable[[], object] = functools.partial(app.stand, "bad", "dealer", r, "P1", 1,
                                                        0, expected=bad)
        unchanged(app, stand, DecisionRefused, "")


def test_a_request_id_reused_for_other_content_is_refused(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app, r = desk.app, desk.round()
    app.place_stake("key-1", "dealer", r, "P1", 1, 100)
    mine = unchanged(app, lambda: app.place_stake("key-1", "dealer", r, "P1", 1, 200),
                     RequestIdReused, "R-M4")
    assert "(place stake)" in str(mine)
    # Another key holder learns only that the id is taken, not what it was used for.
    theirs = unchanged(app, lambda: app.buy_in("key-1", "cashier", "P1", 200),
                       RequestIdReused, "R-M4")
    assert "another key holder" in str(theirs)
    assert "place stake" not in str(theirs)


def test_a_void_returns_every_chip_even_those_already_settled(make_ledger: MakeLedger) -> None:
    # P1 natural takes even money against the ace (paid at once), P2 surrenders... refused
    # against an ace, so P2 insures instead; then the manager voids (R-X13).
    desk = Desk(make_ledger(SteeredShuffle("AS TH AD KS 7C")))
    before = desk.money()
    r = desk.round()
    desk.do("place_stake", r, "P1", 1, 100)
    desk.do("place_stake", r, "P2", 2, 60)
    desk.do("deal", r)
    desk.do("even_money", r, "P1", 1)
    desk.do("insure", r, "P2", 30)
    assert desk.money()["P1"] == (1100, 0)
    desk.do("void", r, "wrong shoe")
    assert desk.money() == before
    assert desk.app.house(desk.table)["available"] == 0
    assert desk.app.round_state(r)["phase"] == "voided"


def test_a_void_after_even_money_was_cashed_out_waits_for_the_chips_to_come_back(
        make_ledger: MakeLedger) -> None:
    # R-X13 takes the even money back; R-M3 lets no balance go below zero.
    desk = Desk(make_ledger(SteeredShuffle("AS TH 9C AD KS 7C 8D")))
    app, r = desk.app, desk.round()
    desk.do("place_stake", r, "P1", 1, 100)
    desk.do("place_stake", r, "P2", 2, 60)
    desk.do("place_stake", r, "P1", 3, 30)
    desk.do("deal", r)
    desk.do("even_money", r, "P1", 1)
    app.cash_out(desk.rid(), "cashier", "P1", 1070)  # all available, straight to the cage
    refusal = unchanged(app, lambda: app.void("v1", "manager", r, "wrong shoe"),
                        InsufficientChips, "R-X13")
    assert ("takes back the 100 the round already paid P1, less the 30 it releases from "
            "stakes still held, and P1 has fewer chips available") in str(refusal)
    assert "0 available" not in str(refusal)  # the dealer may hear it: no balance in it
    app.buy_in(desk.rid(), "cashier", "P1", 70)
    app.void("v2", "manager", r, "wrong shoe")
    assert desk.money()["P1"] == (0, 0)  # 1,000 in, 1,070 out, 70 in, the win of 100 back
    assert app.round_state(r)["phase"] == "voided"


def test_a_ruling_moves_chips_both_ways_and_cannot_take_back_more_than_a_player_has(
        make_ledger: MakeLedger) -> None:
    # P1 19 beats 18, P2 17 loses (1,100 and 900); the ruling takes 5 back from P1 and pays
    # P2 10: the house pays the 5 between them (R-V2).
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    app, r = desk.app, desk.stood_round(100, 100)
    assert desk.money() == {"P1": (1100, 0), "P2": (900, 0)}
    app.record_ruling("g1", "manager", r, "box 2 was paid short", [2], {"P1": -5, "P2": 10})
    assert desk.money() == {"P1": (1095, 0), "P2": (910, 0)}
    assert app.house(desk.table)["available"] == -5
    assert app.round_state(r)["results"] == {"P1": 95, "P2": -90}
    unchanged(app, lambda: app.record_ruling("g2", "manager", r, "all of it back", [2],
                                             {"P1": -2000}), InsufficientChips, "R-M3")


def test_a_statement_says_why_a_void_or_a_ruling_moved_chips(make_ledger: MakeLedger) -> None:
    # A cashier may not read rounds: the player's statement and the house's carry the reason.
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    app, r = desk.app, desk.stood_round(100, 100)

    def last_memo(entries: dict[str, Any]) -> str:
        memo: str = entries["items"][-1]["data"]["memo"]
        return memo

    assert "reason" not in last_memo(app.account_entries("P1"))  # a settlement has none
    app.record_ruling("g1", "manager", r, "box 2 was paid short", [2], {"P2": 10})
    assert last_memo(app.account_entries("P2")) == "RulingRecorded; reason: box 2 was paid short"
    assert last_memo(app.house_entries(desk.table)) == last_memo(app.account_entries("P2"))
    voided = desk.round()
    desk.do("place_stake", voided, "P1", 1, 50)
    app.void("v1", "manager", voided, "  wrong shoe ")
    assert last_memo(app.account_entries("P1")) == "RoundVoided; reason: wrong shoe"


def test_each_statement_entry_carries_the_balance_after_it_on_every_page(
        make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    app = desk.app
    r = desk.round()
    desk.do("place_stake", r, "P1", 1, 50)
    held = app.account_entries("P1")["items"][-1]
    assert held["balance"] == {"available": app.balance("P1")["available"], "held": 50}
    assert held["data"]["held_delta"] == 50
    app.void("v1", "manager", r, "wrong shoe")
    entries: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:  # pages of 1: each starts from the account as it was before it
        page = app.account_entries("P1", after=after, limit=1)
        entries += page["items"]
        after = page["next_after"]
    assert entries == app.account_entries("P1")["items"]
    assert entries[-1]["balance"] == {"available": app.balance("P1")["available"], "held": 0}
    house = app.house_entries(desk.table)["items"]
    assert house[-1]["balance"] == {"available": app.house(desk.table)["available"], "held": 0}
    assert "balance" not in app.table_events(desk.table)["items"][-1]


@pytest.mark.parametrize("reason", ["", "   ", "x" * 501, "line\nbreak"])
def test_a_table_closed_or_its_rules_changed_records_a_real_reason(
        make_ledger: MakeLedger, reason: str) -> None:
    desk = Desk(make_ledger())
    app = desk.app
    # RULES.md asks for no reason to close a table or change its rules: no rule is cited.
    unchanged(app, lambda: app.close_table("c", "manager", desk.table, reason),
              DecisionRefused, "")
    unchanged(app, lambda: app.change_rules("r", "manager", desk.table, CASINO_WILD,
                                            TableLimits(), reason), DecisionRefused, "")
    # And a void's or a ruling's, whoever calls the ledger (the API checks them first).
    r = desk.round()
    unchanged(app, lambda: app.void("v", "manager", r, reason), DecisionRefused, "R-V1")
    unchanged(app, lambda: app.record_ruling("g", "manager", r, reason, [1], {"P1": 5}),
              DecisionRefused, "R-V2")


def test_rules_under_a_presets_name_and_version_are_that_preset(
        make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app = desk.app
    for variant in (CASINO.evolve(decks=2), CASINO.evolve(name="wild21")):
        unchanged(app, functools.partial(app.open_table, "o", "boss", "T2", variant),
                  RuleSetInvalid, "R-S1")
        unchanged(app, functools.partial(app.change_rules, "r", "manager", desk.table,
                                         variant, TableLimits(), "fewer decks"),
                  RuleSetInvalid, "R-S1")
    app.open_table("o", "boss", "T2", CASINO.evolve(decks=2, version=2))


def test_a_rule_sets_name_and_version_stand_for_the_rules_first_recorded_under_them(
        make_ledger: MakeLedger) -> None:
    # Two "wild evening v2" with different payouts would replay as the same rules (R-S1).
    desk = Desk(make_ledger())
    app = desk.app
    evening = CASINO_WILD.evolve(name="wild evening", version=2, natural_pays=(6, 5))
    app.open_table("o1", "boss", "T2", evening)
    other = evening.evolve(natural_pays=(7, 5))
    refusal = unchanged(app, lambda: app.open_table("o2", "boss", "T3", other),
                        RuleSetInvalid, "R-S1")
    assert refusal.field == "version"
    assert evening.content_hash in str(refusal)
    unchanged(app, lambda: app.change_rules("r1", "manager", desk.table, other,
                                            TableLimits(), "new payout"), RuleSetInvalid, "R-S1")
    # A name is written one way only: these would look like "wild evening" v2 elsewhere.
    for lookalike in ("wild evening ", "wild\u00a0evening\u0301", "wi\u0301ld evening"):
        renamed = other.evolve(name=unicodedata.normalize("NFD", lookalike))
        refusal = unchanged(app, functools.partial(app.open_table, "o4", "boss", "T4",
                                                   renamed), RuleSetInvalid, "R-S1")
        assert refusal.field == "name"
    # The same rules again, or under a version of their own, are welcome.
    app.open_table("o3", "boss", "T3", evening)
    app.change_rules("r2", "manager", desk.table, other.evolve(version=3), TableLimits(),
                     "new payout")
    # A table that took other rules under the pair before the ledger recorded pairs (as an
    # earlier version did) keeps them: it may still change its limits.
    table: Any = app.repository.get(ids.table_id("T2"))
    table.trigger_event(Table.RulesChanged, rules=other.to_dict(),
                        rules_hash=other.content_hash, limits=table.limits, reason="before",
                        actor="manager", request_id="legacy")
    app._save([table], Receipt.record(ids.receipt_id("legacy"), table.modified_on, "legacy",
                                      "change_rules", "-", {}, "manager"))
    app.change_rules("r3", "manager", table.id, other, {"table_max": 500}, "lower maximum")
    assert app.table(table.id)["limits"]["table_max"] == 500


def test_a_rounds_events_never_go_back_in_time_when_the_clock_does() -> None:
    now = [datetime(2026, 1, 1, 6, 0, 1, tzinfo=UTC)]
    app = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                     shoe_key=ShoeSealer.new_key(), clock=lambda: now[0])
    desk = Desk(app)
    r = desk.round()
    desk.do("place_stake", r, "P1", 1, 100)
    now[0] -= timedelta(seconds=2)  # a server whose clock is a little behind the first's
    desk.do("void", r, "clock check")
    stamps = [datetime.fromisoformat(e["timestamp"]) for e in app.round_events(r)]
    assert stamps == sorted(stamps)
    assert stamps[-1] > datetime(2026, 1, 1, 6, 0, 1, tzinfo=UTC) > now[0]
    # A table's too: its rules changed, closed and reopened by servers further behind.
    steps: list[Callable[[], object]] = [
        lambda: app.change_rules(desk.rid(), "manager", desk.table, CASINO_WILD,
                                 TableLimits(), "wild card evening"),
        lambda: app.close_table(desk.rid(), "manager", desk.table, "closing"),
        lambda: app.reopen_table(desk.rid(), "manager", desk.table)]
    for step in steps:
        now[0] -= timedelta(seconds=1)
        step()
    table_events: list[Any] = list(app.events.get(desk.table))
    table_stamps = [e.timestamp for e in table_events]
    assert len(table_stamps) == 6  # opened, a shoe, a round, new rules, closed, reopened
    # Each later than the one before: the table/day report keys a table's openings by time.
    assert all(a < b for a, b in itertools.pairwise(table_stamps))
    # And the table closed after its last round ended, the next round starts after that.
    closed = next(e for e in table_events if isinstance(e, Table.Closed))
    assert closed.timestamp > stamps[-1]
    shoe = app.shoe(UUID(app.round_state(r)["shoe_id"]))  # revealed after the round, too
    assert datetime.fromisoformat(shoe["retired_at"]) > stamps[-1]
    now[0] -= timedelta(seconds=1)
    after = desk.round()
    assert datetime.fromisoformat(app.round_events(after)[0]["timestamp"]) > stamps[-1]


def test_a_record_stamped_by_a_clock_that_ran_fast_is_said_in_the_log(
        caplog: pytest.LogCaptureFixture) -> None:
    # One round served by a server a day fast dated every later round at its table a day
    # ahead (time in the record never goes back), onto the next gaming day, and nothing said so.
    now = [datetime(2026, 12, 2, 12, 0, tzinfo=UTC)]
    app = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                     shoe_key=ShoeSealer.new_key(), clock=lambda: now[0])
    desk = Desk(app)
    now[0] += timedelta(days=1)  # the fast server
    r = desk.round()
    now[0] -= timedelta(days=1)
    with caplog.at_level(logging.WARNING, logger="pitboss.ledger"):
        desk.do("place_stake", r, "P1", 1, 100)
        desk.do("place_stake", r, "P2", 2, 100)  # within the minute: said once
    warned = [x.getMessage() for x in caplog.records if "clock" in x.getMessage()]
    assert len(warned) == 1
    assert "86400 s later" in warned[0]
    assert "check that every server keeps time" in warned[0]
    assert datetime.fromisoformat(app.round_events(r)[-1]["timestamp"]) > now[0] + timedelta(
        days=1)
    caplog.clear()
    now[0] += timedelta(days=1, seconds=2)  # the clocks agree again
    with caplog.at_level(logging.WARNING, logger="pitboss.ledger"):
        desk.do("void", r, "clock check")
    assert not [x for x in caplog.records if "clock" in x.getMessage()]


@pytest.mark.parametrize("name", ["Cafe\u0301 1", "\u0301 Table"])
def test_a_new_name_is_written_one_way_only(make_ledger: MakeLedger, name: str) -> None:
    # Written composed and decomposed, "Café 1" would open two tables that look the same.
    app = Desk(make_ledger()).app
    refused = unchanged(app, lambda: app.open_table("o", "boss", name, CASINO), NameRefused,
                        "")  # RULES.md has no rule on names: the field is named instead
    assert refused.field == "name"
    refused = unchanged(app, lambda: app.open_account("a", "cashier", name), NameRefused, "")
    assert refused.field == "player"
    app.open_table("o", "boss", "Caf\u00e9 1", CASINO)


@pytest.mark.parametrize(("name", "named"), [
    ("\u3164", "U+3164 (HANGUL FILLER)"), ("\u115f", "U+115F (HANGUL CHOSEONG FILLER)"),
    ("T1\u034f", "U+034F (COMBINING GRAPHEME JOINER)"), ("T1\ufe0f", "U+FE0F (VARIATION "),
    ("T\u17b41", "U+17B4 (KHMER VOWEL INHERENT AQ)"), ("T1\U000e0100", "U+E0100 ("),
    ("T1\u2800", "U+2800 (BRAILLE PATTERN BLANK)"),
])
def test_a_new_name_holds_no_character_that_shows_nothing(make_ledger: MakeLedger, name: str,
                                                          named: str) -> None:
    # Each printable, so taken before: "T1" with one opened a second table that looks like T1.
    app = Desk(make_ledger()).app
    refused = unchanged(app, lambda: app.open_table("o", "boss", name, CASINO), NameRefused, "")
    assert refused.field == "name"
    assert named in refused.message
    refused = unchanged(app, lambda: app.open_account("a", "cashier", name), NameRefused, "")
    assert refused.field == "player"
    with pytest.raises(RuleSetInvalid, match="shows nothing"):
        app.open_table("o2", "boss", "T2", CASINO.evolve(name=f"house {name}"))


@pytest.mark.parametrize(("name", "named", "plain"), [
    ("Table \uff17", "U+FF17 (FULLWIDTH DIGIT SEVEN)", "Table 7"),
    ("\uff34able 7", "U+FF34 (FULLWIDTH LATIN CAPITAL LETTER T)", "Table 7"),
    ("Sur\ufb01ne", "U+FB01 (LATIN SMALL LIGATURE FI)", "Surfine"),
    ("\U0001d413able 7", "U+1D413 (MATHEMATICAL BOLD CAPITAL T)", "Table 7"),
    ("\u0132ssel", "U+0132 (LATIN CAPITAL LIGATURE IJ)", "IJssel"),
    ("Table \u2161", "U+2161 (ROMAN NUMERAL TWO)", "Table II"),
    # Half-width KA and its voiced mark: the name to write composes them, not the mark alone.
    ("Table \uff76\uff9e", "U+FF76 (HALFWIDTH KATAKANA LETTER KA)", "Table \u30ac"),
])
def test_a_new_name_holds_no_character_standing_for_another(make_ledger: MakeLedger, name: str,
                                                           named: str, plain: str) -> None:
    # In composed form and showing something, each opened a table that looks like "Table 7".
    app = Desk(make_ledger()).app
    refused = unchanged(app, lambda: app.open_table("o", "boss", name, CASINO), NameRefused, "")
    assert refused.field == "name"
    assert f"that looks like it, as {named} does: write '{plain}'." in refused.message
    with pytest.raises(RuleSetInvalid, match=f"as {re.escape(named)} does: write 'house "):
        app.open_table("o2", "boss", "T2", CASINO.evolve(name=f"house {name}"))
    app.open_table("o3", "boss", plain, CASINO)


@pytest.mark.parametrize("name", [
    "\u0e01\u0e33\u0e1e\u0e25",  # Thai, with SARA AM (U+0E33), as Thai keyboards type it
    "\u0e84\u0eb3",  # Lao, with U+0EB3
    "Mesa N\u00ba 3", "1\u00aa Mesa",  # the ordinal indicators
    "Casino\u2122",  # a trade mark sign
    "\u3131 Table",  # a Hangul letter as a Korean keyboard types it alone
])
def test_a_compatibility_character_that_is_how_a_word_is_written_is_taken(
        make_ledger: MakeLedger, name: str) -> None:
    # Each was refused as a compatibility character (NFKC), told to write a form Unicode
    # advises against (a combining mark and SARA AA for SARA AM).
    app = Desk(make_ledger()).app
    app.open_table("o", "boss", name, CASINO)
    app.open_table("o2", "boss", "T2", CASINO.evolve(name=f"house {name}"))


def test_rules_recorded_before_a_check_on_their_name_came_in_stay_usable(
        make_ledger: MakeLedger, monkeypatch: pytest.MonkeyPatch) -> None:
    # Recorded under a name a later check refuses, they could no longer be put in force at
    # another table, nor again at their own.
    desk = Desk(make_ledger())
    app = desk.app
    old = CASINO.evolve(name="house \uff17")
    monkeypatch.setattr("ledger.application.unwritten", lambda *_: None)  # an earlier version
    app.open_table("o1", "boss", "Old rules", old)
    monkeypatch.undo()
    app.open_table("o2", "boss", "Old rules again", old)
    app.change_rules("c1", "boss", desk.table, old, TableLimits(), "the house rules")
    with pytest.raises(RuleSetInvalid, match="U\\+FF17"):  # new rules under that name: checked
        app.open_table("o3", "boss", "New rules", old.evolve(version=2))
    # Other content under the recorded name and version: the clash is said (R-S1), not the name.
    clash = old.evolve(decks=2)
    with pytest.raises(RuleSetInvalid, match="stands for other rules already"):
        app.open_table("o4", "boss", "Other rules", clash)


@pytest.mark.parametrize("player", ["Jos\u00e9", "ann smith", "_type_", "_data_", "-1", "P" * 65])
def test_a_new_player_id_is_one_every_read_of_an_account_takes(make_ledger: MakeLedger,
                                                                 player: str) -> None:
    # Opened before, "José" and "ann smith" held chips that no route could show or cash out
    # (a path takes the ids the API opens accounts with); and a round settled between
    # players "_type_" and "_data_" recorded results that read back as no object at all.
    app = Desk(make_ledger()).app
    refused = unchanged(app, lambda: app.open_account("a", "cashier", player), NameRefused, "")
    assert refused.field == "player"
    assert "A-Z a-z 0-9" in refused.message or "1 to 64" in refused.message
    app.open_account("b", "cashier", "ann.smith+1@example")


def test_rules_asking_for_another_shoe_start_the_next_round_on_one(
        make_ledger: MakeLedger) -> None:
    deep = CASINO.evolve(name="deep shoe", penetration_percent=90)
    desk = Desk(make_ledger(), rules=deep)
    app = desk.app
    first = desk.round()
    old = UUID(app.round_state(first)["shoe_id"])
    desk.do("void", first, "new rules")
    app.change_rules(desk.rid(), "manager", desk.table,
                     deep.evolve(version=2, penetration_percent=50), TableLimits(), "shallower")
    second = desk.round()
    assert UUID(app.round_state(second)["shoe_id"]) != old
    retired = [e for e in app.events.get(old) if isinstance(e, ShoeRecord.Retired)]
    assert [e.reason for e in retired] == ["the rules changed: decks, wild cards or penetration"]


def test_changed_rules_apply_to_future_rounds_only(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    old = desk.round()
    old_hash = desk.app.round_state(old)["rules_hash"]
    desk.do("void", old, "table change")
    desk.app.change_rules(desk.rid(), "manager", desk.table, CASINO_WILD, TableLimits(),
                          "wild card evenings")
    new = desk.round()
    assert desk.app.round_state(old)["rules_hash"] == old_hash == CASINO.content_hash
    assert desk.app.round_state(new)["rules_hash"] == CASINO_WILD.content_hash


def test_a_round_starts_on_a_new_shoe_when_the_cards_before_the_cut_card_cannot_deal_it(
        make_ledger: MakeLedger) -> None:
    # One deck cut at 26. Round 1 takes 12 cards: 14 are left before the cut card, fewer than
    # the 15 a deal at all 7 boxes takes (R-H4), so round 2 starts on a new shoe; before, it
    # started on this one and could run out mid-round, which voids it.
    one_deck = CASINO.evolve(name="one deck", decks=1, penetration_percent=50)
    desk = Desk(make_ledger(SteeredShuffle("2S 2H 5D 3S 4H 2C 3C 2D 3H 3D 4C 5S")),
                rules=one_deck)
    r = desk.round()
    first = desk.app.table(desk.table)["shoe_id"]
    desk.do("place_stake", r, "P1", 1, 10)
    desk.do("place_stake", r, "P2", 2, 10)
    desk.do("deal", r)
    for player, box, hits in (("P1", 1, 2), ("P2", 2, 2)):
        for _ in range(hits):
            desk.do("hit", r, player, box, 0)
        desk.do("stand", r, player, box, 0)
    desk.do("play_dealer", r)
    desk.do("settle", r)
    assert (desk.app.shoe(UUID(first))["position"], desk.app.shoe(UUID(first))["cut"]) == (12, 26)
    desk.round()
    assert desk.app.table(desk.table)["shoe_id"] != first
    retired = desk.app.shoe(UUID(first))
    assert retired["retired"]
    assert retired["verified"]


def test_not_found_says_nothing_of_what_else_an_id_may_be(make_ledger: MakeLedger) -> None:
    # A request id's receipt has a predictable id: asked for as a round, a shoe or a table, it
    # must answer as an id nobody used does, or anyone could learn which request ids were used.
    desk = Desk(make_ledger())
    used, unused = ids.receipt_id("req-1"), ids.receipt_id("never-sent")
    reads: list[Callable[[UUID], object]] = [
        desk.app.round_state, lambda i: desk.app.round_state(i, version=1), desk.app.shoe,
        desk.app.table, desk.app.round_events, desk.app.check_round]

    def answers(aggregate_id: UUID) -> list[str]:
        said = []
        for read in reads:
            with pytest.raises(NotFound) as refused:
                read(aggregate_id)
            said.append(str(refused.value).replace(str(aggregate_id), "<id>"))
        return said

    assert answers(used) == answers(unused)


def test_the_shoe_order_stays_sealed_until_the_shoe_retires(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app, r = desk.app, desk.round()
    shoe_id = UUID(app.round_state(r)["shoe_id"])
    live = app.shoe(shoe_id)
    assert "order" not in live
    assert "salt" not in live
    desk.do("place_stake", r, "P1", 1, 10)
    desk.do("place_stake", r, "P2", 2, 10)
    desk.do("deal", r)
    dealt = [e["data"]["card"] for e in app.round_events(r) if "card" in e["data"]]
    assert len(dealt) == 5
    desk.do("void", r, "closing early")
    app.close_table(desk.rid(), "manager", desk.table, "end of shift")
    revealed = app.shoe(shoe_id)
    assert revealed["retired"]
    assert verify_commitment(revealed["order"], revealed["salt"], live["commitment"])
    assert revealed["order"][:5] == dealt
    assert app.verify_shoe(shoe_id) == []


def test_a_hole_card_is_checked_against_the_shoe_by_the_face_it_was_turned_over_with(
        make_ledger: MakeLedger) -> None:
    # wild21 deals the dealer's first card face down, recorded without its face (R-H2): the
    # shoe check takes the face from the reveal, and re-adjudication too; a round voided
    # before the reveal never records it (its shoe's order shows it once retired).
    desk = Desk(make_ledger(SteeredShuffle("TS 9H 5C 7S 5H 6D TH")), rules=WILD21)
    app = desk.app
    played = desk.round()  # P1 T7, P2 95; the dealer (5C) 6D, then TH: 21
    desk.do("place_stake", played, "P1", 1, 10)
    desk.do("place_stake", played, "P2", 2, 10)
    desk.do("deal", played)
    desk.do("stand", played, "P1", 1)
    desk.do("stand", played, "P2", 2)
    desk.do("play_dealer", played)
    desk.do("settle", played)
    voided = desk.round()
    desk.do("place_stake", voided, "P1", 1, 10)
    desk.do("deal", voided)
    desk.do("void", voided, "dealer misdealt")
    faces = {r: [(e["data"]["card"], e["data"]["face_up"]) for e in app.round_events(r)
                 if e["type"] == "CardDealt" and e["data"]["box"] == 0]
             for r in (played, voided)}
    assert faces[played] == [("hidden", False), ("6D", True), ("TH", True)]
    assert faces[voided][0] == ("hidden", False)
    app.close_table(desk.rid(), "manager", desk.table, "end of shift")
    shoe_id = UUID(app.round_state(played)["shoe_id"])
    assert app.shoe(shoe_id)["order"][2] == "5C"  # the hole card, turned over as 5C
    assert app.verify_shoe(shoe_id) == []
    assert app.check_round(played) == app.check_round(voided) == []
    # A round recorded before hole cards were hidden holds the face at the deal: it still
    # re-adjudicates cleanly.
    created, *rest = list(app.events.get(played))
    assert isinstance(created, Round.Created)
    facts = [e.fact() for e in rest if isinstance(e, Round.Recorded)]
    legacy = [dataclasses.replace(x, card="5C") if isinstance(x, f.CardDealt)
              and not x.face_up else x for x in facts]
    assert legacy != facts
    limits = TableLimits.from_dict(created.limits)
    assert readjudicate(WILD21, limits, legacy) == []
    # An altered record gives a finding, not an error: a stake removed deals one box fewer
    # (the hole card lands face up on a box), a reveal removed leaves the hole card unknown.
    no_p2 = [x for x in facts if not (isinstance(x, f.StakePlaced) and x.bettor == "P2")]
    (finding,) = readjudicate(WILD21, limits, no_p2)
    assert "BettingClosed" in finding
    no_reveal = [x for x in facts if not isinstance(x, f.HoleCardRevealed)]
    (finding,) = readjudicate(WILD21, limits, no_reveal)
    assert "which card was dealt face down from position 2" in finding, finding


def test_state_at_any_version_and_the_replay_agree(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger(SteeredShuffle("8S TH 9D 8H 9C 8D 3C 2C TD")))
    app, r = desk.app, desk.round()
    desk.do("place_stake", r, "P1", 1, 10)
    desk.do("place_stake", r, "P2", 2, 10)
    desk.do("deal", r)
    desk.do("split", r, "P1", 1, 0)
    frames = app.replay(r)
    events = app.round_events(r)
    assert [fr["event"] for fr in frames] == events
    for frame in frames:
        version = frame["event"]["version"]
        assert frame["state"] == app.round_state(r, version)
    assert frames[-1]["state"] == app.round_state(r)
    assert len(app.round_state(r, 2)["boxes"]) == 1
    last = frames[-1]["event"]["version"]
    with pytest.raises(NotFound, match=f"has no version {last + 1}: it is at version {last}"):
        app.round_state(r, last + 1)  # not the latest state in its place


def test_round_queries_refuse_the_id_of_something_else(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app = desk.app
    for query in (app.round_state, app.round_events, app.replay, app.check_round,
                  lambda i: app.round_state(i, 1)):
        with pytest.raises(NotFound, match=r"(no|not a) round"):
            query(desk.table)



def test_an_id_given_as_text_is_the_id_and_anything_else_names_nothing(
        make_ledger: MakeLedger) -> None:
    # Recorded as given, a round id in text would not match the round's own: its postings
    # would show as chips posted around the round.
    desk = Desk(make_ledger(SteeredShuffle("TS TH TD 9S 7C 8D")))
    app, r = desk.app, desk.round()
    spellings = [str(r), str(r).upper(), r.hex, f"{{{r}}}"]
    desk.do("place_stake", spellings[0], "P1", 1, 100)
    desk.do("place_stake", spellings[1], "P2", 2, 50)
    desk.do("deal", spellings[2])
    desk.do("stand", spellings[3], "P1", 1, 0)
    desk.do("stand", r, "P2", 2, 0)
    desk.do("play_dealer", spellings[1])
    desk.do("settle", spellings[2])
    assert desk.money() == {"P1": (1100, 0), "P2": (950, 0)}
    postings = [e for p in ("P1", "P2") for e in app.events.get(ids.account_id(p))
                if isinstance(e, Account.Posted)]
    assert len(postings) == 4
    assert {type(e.round_id) for e in postings} == {UUID}
    for spelling in spellings:
        assert app.check_round(spelling) == []  # type: ignore[arg-type]
        assert app.round_state(spelling)["phase"] == "settled"  # type: ignore[arg-type]
    assert app.table(str(desk.table).upper())["name"] == "T1"  # type: ignore[arg-type]

    class DriversUuid(UUID):  # what some database drivers hand back
        pass

    assert app.check_round(DriversUuid(int=r.int)) == []
    desk.do("start_round", DriversUuid(int=desk.table.int))
    before = app.recorder.max_notification_id()
    for nothing in ("not-a-round", 5, None, r.bytes):
        with pytest.raises(NotFound, match="There is no round") as refused:
            desk.do("hit", nothing, "P1", 1, 0)
        assert refused.value.rule == ""  # RULES.md has no rule on what does not exist
        with pytest.raises(NotFound, match="There is no round"):
            app.check_round(nothing)  # type: ignore[arg-type]
    assert app.recorder.max_notification_id() == before

def test_a_tables_record_is_a_tables_only(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app, r = desk.app, desk.round()
    assert [e["type"] for e in app.table_events(desk.table)["items"]] == [
        "Created", "ShoeStarted", "RoundStarted"]
    for other in (r, ids.account_id("P1")):
        with pytest.raises(NotFound, match="no table"):
            app.table_events(other)


def test_chips_of_another_currency_are_refused_at_the_table(make_ledger: MakeLedger) -> None:
    desk = Desk(make_ledger())
    app, r = desk.app, desk.round()
    app.open_account(desk.rid(), "cashier", "tourist", currency="USD")
    app.buy_in(desk.rid(), "cashier", "tourist", 500)
    refusal = unchanged(app, lambda: desk.do("place_stake", r, "tourist", 3, 10), BetRefused,
                        "R-M1")
    assert "USD" in str(refusal)
    assert app.balance("tourist") == {**app.balance("tourist"), "available": 500, "held": 0}


def test_a_player_has_one_account(make_ledger: MakeLedger) -> None:
    app = Desk(make_ledger()).app
    # A taken name cites no rule (R-M3, no credit, said nothing of it), as a taken table's.
    refusal = unchanged(app, lambda: app.open_account("again", "cashier", "P1"),
                        AccountExists, "")
    assert str(refusal) == "Player P1 already has an account."
    assert refusal.field == "player"


@pytest.mark.parametrize("currency", ["eur", "EU", "ÄÖÜ", "EUR "])
def test_a_currency_is_a_three_letter_iso_code(make_ledger: MakeLedger, currency: str) -> None:
    app = make_ledger()
    unchanged(app, lambda: app.open_account("a", "cashier", "P9", currency=currency),
              CurrencyRefused, "R-M1")


@pytest.mark.parametrize("after", [True, -1, 1.5, "1", 10**9 + 1])
def test_a_page_of_entries_starts_after_a_version(make_ledger: MakeLedger, after: Any) -> None:
    app = Desk(make_ledger()).app
    with pytest.raises(DecisionRefused, match="starts after a version") as refused:
        app.account_entries("P1", after=after)
    assert refused.value.field == "after"


def test_an_account_is_snapshotted_as_committed_every_200_events(
        make_ledger: MakeLedger) -> None:
    app = make_ledger()
    app.open_account("s-open", "cashier", "P1")  # version 1
    for n in range(199):
        app.buy_in(f"s-{n}", "cashier", "P1", 1)  # versions 2 .. 200
    assert app.snapshots is not None
    taken = list(app.snapshots.get(ids.account_id("P1")))
    assert [s.originator_version for s in taken] == [200]
    loaded: Account = app.repository.get(ids.account_id("P1"))  # from the snapshot
    assert (loaded.version, loaded.available) == (200, 199)


def test_a_table_is_snapshotted_as_committed_every_200_events(make_ledger: MakeLedger) -> None:
    # A table records every round started at it: read from its events alone, a table in play
    # for a year would take each new process tens of seconds to load.
    app = make_ledger()
    table = app.open_table("t-open", "boss", "T1", CASINO)
    for n in range(400):
        if app.table(table)["version"] >= 200:
            break
        app.void(f"t-void-{n}", "manager", app.start_round(f"t-start-{n}", "dealer", table),
                 "a test of snapshots")
    assert app.snapshots is not None
    assert [s.originator_version for s in app.snapshots.get(table)] == [200]
    replayed: Any = None
    events: list[Any] = list(app.events.get(table))
    for event in events:
        replayed = event.mutate(replayed)
    loaded: Table = app.repository.get(table)  # from the snapshot
    assert loaded.summary() == replayed.summary()
    assert loaded.version == 200


def test_an_event_stored_before_a_field_was_added_shows_the_fields_default(
        make_ledger: MakeLedger) -> None:
    # A reopening recorded before it took a reason showed no reason at all, one recorded
    # since without one an empty reason: two shapes for the same thing.
    app = make_ledger()
    table_id = app.open_table("o", "boss", "T1", CASINO)
    app.close_table("c", "dealer", table_id, "a break")
    table: Any = app.repository.get(table_id)
    event = Table.Reopened(originator_id=table_id,  # type: ignore[call-arg]
                           originator_version=table.version + 1, timestamp=table.modified_on,
                           actor="dealer", request_id="then")
    stored = app.mapper.to_stored_event(event)
    state = json.loads(stored.state)
    del state["reason"]  # as the version before the field stored it
    app.recorder.insert_events([dataclasses.replace(stored, state=json.dumps(state).encode())])
    (shown,) = [e for e in app.table_events(table_id)["items"] if e["type"] == "Reopened"]
    assert shown["data"] == {"reason": ""}


def test_rule_changes_naming_different_limits_keep_both(make_ledger: MakeLedger) -> None:
    app = make_ledger()
    table = app.open_table("l-open", "boss", "T1", CASINO, TableLimits())
    app.change_rules("l-1", "manager", table, CASINO, {"table_max": 2000}, "a higher maximum")
    app.change_rules("l-2", "manager", table, CASINO, {"table_min": 20}, "a higher minimum")
    version = app.table(table)["version"]
    # A late retry of the first change, after the second: answered, nothing recorded.
    app.change_rules("l-1", "manager", table, CASINO, {"table_max": 2000}, "a higher maximum")
    after = app.table(table)
    assert after["version"] == version
    assert (after["limits"]["table_min"], after["limits"]["table_max"]) == (20, 2000)


@pytest.mark.parametrize("then", ["start a round", "close the table"])
def test_a_shoe_that_ran_out_mid_round_is_retired_as_such(make_ledger: MakeLedger,
                                                          then: str) -> None:
    # One deck cut at 46, one box. Ten rounds take 4 cards each (the player stands on two,
    # the dealer draws one to 17 or 18); the eleventh deals A, 3, A and takes 9 hits, the
    # last card on 21, and the dealer's draw finds the shoe empty: the round is voided (R-H4).
    # The shoe was retired as "cut card reached", as if it had ended between rounds; later it
    # stayed live (not to be verified) until the table's next round, and a table closed
    # meanwhile retired it as "table closed".
    suits = {rank: [rank + s for s in "SHDC"] for rank in "A23456789T"}
    tens = [rank + s for rank in "TJQK" for s in "SHDC"]

    def cards(ranks: str) -> list[str]:
        return [tens.pop() if r == "T" else suits[r].pop() for r in ranks]

    order = [c for p, d in (("TT", "T7"), ("TT", "T7"), ("TT", "T7"), ("45", "T7"),
                            ("45", "T8"), ("45", "T8"), ("45", "T8"), ("66", "T8"),
                            ("66", "T9"), ("99", "T9"))
             for c in (lambda pc, dc: [pc[0], dc[0], pc[1], dc[1]])(cards(p), cards(d))]
    order += cards("A3A") + cards("AA2222333")
    assert len(set(order)) == 52
    rules = CASINO.evolve(name="one deck, one box", decks=1, penetration_percent=90,
                          min_boxes_lone_player=1)
    app = make_ledger(SteeredShuffle(" ".join(order)))
    desk = Desk(app, players=("P1",))
    table = app.open_table(desk.rid(), "boss", "one box", rules, TableLimits(boxes=1))
    for _ in range(10):
        r = app.start_round(desk.rid(), "dealer", table)
        desk.do("place_stake", r, "P1", 1, 10)
        desk.do("deal", r)
        desk.do("stand", r, "P1", 1, 0)
        desk.do("play_dealer", r)
        desk.do("settle", r)
    shoe = app.table(table)["shoe_id"]
    r = app.start_round(desk.rid(), "dealer", table)
    desk.do("place_stake", r, "P1", 1, 10)
    desk.do("deal", r)
    for _ in range(9):
        desk.do("hit", r, "P1", 1, 0)
    if app.round_state(r)["phase"] == "playing":
        desk.do("play_dealer", r)
    assert app.round_state(r)["phase"] == "voided"
    retired = app.shoe(UUID(shoe))
    assert (retired["position"], retired["retired"]) == (52, True)
    assert retired["retired_reason"] == "every card dealt"
    assert app.verify_shoe(UUID(shoe)) == []
    if then == "start a round":
        app.start_round(desk.rid(), "dealer", table)
        assert app.table(table)["shoe_id"] != shoe
    else:
        app.close_table(desk.rid(), "boss", table, "closing time")
    assert app.shoe(UUID(shoe)) == retired
