"""``pitboss replay``'s text: a round's frames as one line per event and the table after cards."""

from __future__ import annotations

from typing import Any

from api.replay_text import render, sentence
from ledger.application import GameLedger
from ledger.rules import CASINO
from ledger.sealing import ShoeSealer
from tests.scripted import SteeredShuffle


def played_round(shoe: str, decisions: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """The replay frames of one settled casino round, P1 on box 1 and P2 on box 2."""
    app = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                     shoe_key=ShoeSealer.new_key(), randbelow=SteeredShuffle(shoe))
    table = app.open_table("t", "boss", "T1", CASINO)
    for player in ("P1", "P2"):
        app.open_account(f"a-{player}", "cashier", player)
        app.buy_in(f"b-{player}", "cashier", player, 1_000)
    r = app.start_round("s", "dealer", table)
    app.place_stake("p1", "dealer", r, "P1", 1, 100)
    app.place_stake("p2", "dealer", r, "P2", 2, 50)
    app.deal("d", "dealer", r)
    for n, (decision, player, box) in enumerate(decisions):
        getattr(app, decision)(f"x{n}", "dealer", r, player, box, 0)
    app.play_dealer("pd", "dealer", r)
    app.settle("st", "dealer", r)
    return app.replay(r)


def test_each_event_is_a_line_and_the_settled_table_shows_how_each_hand_ended() -> None:
    # P1 6+5, dealer 7 up; P2 10+9. P1 doubles onto a ten (21); P2 stands; dealer 7+10.
    frames = played_round("6S TH 7D 5C 9H TD TC", [("double", "P1", 1), ("stand", "P2", 2)])
    lines = render(frames)
    events = [line for line in lines if line.startswith("v")]
    assert len(events) == len(frames)
    assert events[0].split()[2:] == ["dealer", "round", "1", "opens", "under", "casino", "v1",
                                     "(EUR)"]
    assert any(e.endswith("P1 doubles on box 1 (+100)") for e in events)
    assert any("P1 on box 1: won +200" in e for e in events)
    assert any("P2 on box 2: won +50" in e for e in events)
    assert events[-1].endswith("round settled: P1 +200, P2 +50; house -250")
    final = lines[lines.index(events[-1]) + 1:]
    assert final[0].split() == ["dealer", "7♦", "10♣", "17"]
    assert final[1].split() == ["box", "1", "6♠", "5♣", "10♦", "21", "doubled", "P1", "200"]
    assert final[2].split() == ["box", "2", "10♥", "9♥", "19", "stood", "P2", "50"]


def test_the_time_column_keeps_its_shape_on_a_whole_second() -> None:
    frames = played_round("6S TH 7D 5C 9H TD TC", [("stand", "P1", 1), ("stand", "P2", 2)])
    first = frames[0]
    whole = {**first, "event": {**first["event"], "timestamp": "2026-01-02T16:13:17+00:00"}}
    fraction = {**first, "event": {**first["event"],
                                   "timestamp": "2026-01-02T16:13:17.790123+00:00"}}
    assert render([whole])[0].split()[1] == "16:13:17.000"
    assert render([fraction])[0].split()[1] == "16:13:17.790"


def test_a_ruling_names_the_versions_it_corrects() -> None:
    line = sentence("RulingRecorded", {"reason": "short paid", "adjustments": {"P2": 5},
                                       "corrects": [18, 19]})
    assert line == "ruling: short paid (P2 +5; corrects v18, v19)"
