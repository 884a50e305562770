"""``pitboss replay``'s text: a round's frames as one line per event and the table after cards."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from api.replay_text import render, sentence
from ledger.application import GameLedger
from ledger.rules import CASINO
from ledger.sealing import ShoeSealer
from tests.scripted import SteeredShuffle


def dealt_round(shoe: str, stakes: tuple[tuple[str, int, int], ...] = (
        ("P1", 1, 100), ("P2", 2, 50))) -> tuple[GameLedger, UUID]:
    """A casino round dealt from ``shoe``, with ``stakes`` (player, box, amount) in turn: P1
    on box 1 for 100 and P2 on box 2 for 50, unless they say otherwise."""
    app = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"},
                     shoe_key=ShoeSealer.new_key(), randbelow=SteeredShuffle(shoe))
    table = app.open_table("t", "boss", "T1", CASINO)
    for player in dict.fromkeys(player for player, _, _ in stakes):
        app.open_account(f"a-{player}", "cashier", player)
        app.buy_in(f"b-{player}", "cashier", player, 1_000)
    r = app.start_round("s", "dealer", table)
    for n, (player, box, amount) in enumerate(stakes, 1):
        app.place_stake(f"p{n}", "dealer", r, player, box, amount)
    app.deal("d", "dealer", r)
    return app, r


def played_round(shoe: str, decisions: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """The replay frames of one settled casino round, P1 on box 1 and P2 on box 2."""
    app, r = dealt_round(shoe)
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
                                     "(EUR;", "rules", f"{CASINO.content_hash[:12]})"]
    assert any(e.endswith("P1 doubles on box 1 (+100)") for e in events)
    assert any(e.endswith("P1 on box 1: won +200 (21 beats the dealer's 17 (R-G5); stake 200, "
                          "rate 1:1, 200 back, 200 paid)") for e in events), events
    assert any("P2 on box 2: won +50" in e for e in events)
    assert events[-1].endswith("round settled: P1 +200, P2 +50; house -250")
    assert any(e.endswith("the dealer stands on 17: 7♦ 10♣") for e in events), events
    final = lines[lines.index(events[-1]) + 1:]
    assert final[0].split() == ["dealer", "7♦", "10♣", "17"]
    assert final[1].split() == ["box", "1", "6♠", "5♣", "10♦", "21", "doubled", "P1", "200"]
    assert final[2].split() == ["box", "2", "10♥", "9♥", "19", "stood", "P2", "50"]


def test_a_hand_hit_to_21_ends_the_round_done_as_a_hand_stood_ends_it_stood() -> None:
    # Every hand is settled once the round is: a 21 reached by a hit read "settled" on the
    # last table, beside a hand that stood, which read "stood".
    frames = played_round("6S TH 7D 5C 9H TD TC", [("hit", "P1", 1), ("stand", "P2", 2)])
    lines = render(frames)
    final = lines[lines.index([line for line in lines if line.startswith("v")][-1]) + 1:]
    assert final[1].split() == ["box", "1", "6♠", "5♣", "10♦", "21", "done", "P1", "100"]
    assert final[2].split() == ["box", "2", "10♥", "9♥", "19", "stood", "P2", "50"]


def test_the_time_column_keeps_its_shape_on_a_whole_second() -> None:
    frames = played_round("6S TH 7D 5C 9H TD TC", [("stand", "P1", 1), ("stand", "P2", 2)])
    first = frames[0]
    whole = {**first, "event": {**first["event"], "timestamp": "2026-01-02T16:13:17+00:00"}}
    fraction = {**first, "event": {**first["event"],
                                   "timestamp": "2026-01-02T16:13:17.790123+00:00"}}
    assert render([whole])[-1].split()[1] == "16:13:17.000"
    assert render([fraction])[-1].split()[1] == "16:13:17.790"


def test_a_round_that_runs_past_midnight_marks_the_new_day_and_times_are_utc() -> None:
    frames = played_round("6S TH 7D 5C 9H TD TC", [("stand", "P1", 1), ("stand", "P2", 2)])
    stamps = ["2026-01-02T23:59:59.5+00:00", "2026-01-03T01:00:00.25+01:00"]  # one instant
    late = [{**f, "event": {**f["event"], "timestamp": t}}
            for f, t in zip(frames, stamps, strict=False)]
    lines = render(late)
    assert lines[1].startswith("opened 2026-01-02 23:59:59 UTC")
    events = [line for line in lines if line.startswith(("v", "----"))]
    assert [e.split()[:2] for e in events] == [["v1", "23:59:59.500"], ["----", "2026-01-03"],
                                               ["v2", "00:00:00.250"]]


def test_a_split_boxs_hands_are_named_alike_in_the_events_and_the_table() -> None:
    # The table read "box 1.0" and "box 1.1" where the events said "box 1" and "box 1 hand 1":
    # which line was hand 0's took reading the whole round.
    app, r = dealt_round("8S TH 7D 8H 9C 3C TC 5S KD QD")  # P1 8,8; P2 19; dealer 7
    app.split("x1", "dealer", r, "P1", 1, 0)
    for hand in (0, 1):
        app.stand(f"s{hand}", "dealer", r, "P1", 1, hand)
    app.stand("s2", "dealer", r, "P2", 2, 0)
    app.play_dealer("pd", "dealer", r)
    app.settle("st", "dealer", r)
    lines = render(app.replay(r))
    said = [line.split(None, 3)[3] for line in lines if line.startswith("v")]
    assert [s for s in said if "box 1" in s] == [
        "P1 stakes 100 on box 1", "8♠ to box 1 (shoe position 0)",
        "8♥ to box 1 (shoe position 3)", "P1 splits on box 1.0 (+100)",
        "3♣ to box 1.0 (shoe position 5)", "P1 stands on box 1.0",
        "10♣ to box 1.1 (shoe position 6)", "P1 stands on box 1.1",
        *[s for s in said if s.startswith("P1 on box 1.")]]
    assert [s.split(":")[0] for s in said if s.startswith("P1 on ")] == ["P1 on box 1.0",
                                                                        "P1 on box 1.1"]
    tables = [line.split()[:2] for line in lines if line.strip().startswith("box 1")]
    assert tables[-2:] == [["box", "1.0"], ["box", "1.1"]]


def test_a_voided_rounds_hands_all_show_as_voided_whatever_they_were() -> None:
    # A bust (or forfeited, or natural) hand kept its label beside "round voided", which
    # undoes every outcome (R-X13).
    app, r = dealt_round("6S TH 7D 5C 9H TD TC")  # P1 11, P2 19 against the dealer's 7
    app.stand("x1", "dealer", r, "P1", 1, 0)
    app.hit("x2", "dealer", r, "P2", 2, 0)  # 29
    shown = [line for line in render(app.replay(r)) if line.split()[:2] == ["box", "2"]]
    assert shown[-1].split()[-3:] == ["bust", "P2", "50"]
    app.void("v", "boss", r, "a misdeal")
    final = render(app.replay(r))[-2:]
    assert [line.split()[-3:] for line in final] == [["voided", "P1", "100"],
                                                     ["voided", "P2", "50"]]


def test_a_ruling_names_the_versions_it_corrects() -> None:
    line = sentence("RulingRecorded", {"reason": "short paid", "adjustments": {"P2": 5},
                                       "corrects": [18, 19]})
    assert line == "ruling: short paid (P2 +5; corrects v18, v19)"


def test_a_settlement_shows_its_arithmetic_and_insurance_is_named() -> None:
    natural = {"line": "main", "bettor": "ann", "box": 1, "hand": 0, "outcome": "won",
               "held": 15, "released": 15, "lost": 0, "won": 22, "rate": [3, 2],
               "remainder": [1, 2], "reason": "natural (R-G6)", "prize": ""}
    assert sentence("StakeSettled", natural) == (
        "ann on box 1: won +22 (natural (R-G6); stake 15, rate 3:2, 15 back, 22 paid, "
        "1/2 minor unit rounded away)")
    # On a table of 5-cent chips: 2 1/2 cents, not a ratio or a count of chips.
    assert sentence("StakeSettled", {**natural, "held": 25, "released": 25, "won": 35,
                                     "remainder": [5, 2]}).endswith(
        "35 paid, 5/2 minor units rounded away)")
    assert sentence("StakeSettled", {**natural, "outcome": "even_money"}).startswith(
        "ann on box 1: even money +22 (")
    insurance = {**natural, "line": "insurance", "box": 0, "outcome": "lost", "released": 0,
                 "lost": 15, "won": 0, "rate": [0, 1], "remainder": [0, 1],
                 "reason": "no dealer natural (R-C5)"}
    assert sentence("StakeSettled", insurance) == (
        "ann on insurance: lost -15 (no dealer natural (R-C5); stake 15, rate 0:1)")


def test_a_void_says_what_it_released_and_what_it_took_back() -> None:
    line = sentence("RoundVoided", {"reason": "misdeal", "released": {"ann": 100, "bob": 0},
                                    "reversals": {"bob": -15}})
    assert line == "round voided: misdeal (released: ann 100; settled results undone: bob -15)"


def test_a_voided_rounds_hands_still_in_play_show_as_voided() -> None:
    # They showed as live in the replay's last frame, beside "round voided".
    app, r = dealt_round("6S TH 7D 5C 9H TD TC")
    before = render(app.replay(r))
    app.void("v", "boss", r, "a misdeal")
    lines = render(app.replay(r))
    assert before[-2].split()[-3:] == ["live", "P1", "100"]
    assert lines[-2:] == [line.replace("live  ", "voided") for line in before[-2:]]
    assert lines[-1].split()[-3:] == ["voided", "P2", "50"]


def test_each_ruling_is_followed_by_the_results_it_leaves_standing() -> None:
    # A manager reading the printout had to add the rulings to the settlement by hand.
    app, r = dealt_round("6S TH 7D 5C 9H TD TC")  # P1 11, P2 19 against the dealer's 7
    app.stand("x1", "dealer", r, "P1", 1, 0)
    app.stand("x2", "dealer", r, "P2", 2, 0)
    app.play_dealer("pd", "dealer", r)
    app.settle("st", "dealer", r)
    settled = app.round_state(r)["version"]
    app.record_ruling("r1", "boss", r, "misread total", [settled], {"P1": 100})
    app.record_ruling("r2", "boss", r, "the first ruling was wrong", [settled + 1],
                      {"P1": -40, "P2": 5})
    lines = render(app.replay(r))
    rulings = [i for i, line in enumerate(lines) if " ruling: " in line]
    assert len(rulings) == 2
    assert [line.split(": ", 1)[1] for line in lines if "round settled: " in line] == [
        "P1 -100, P2 +50; house +50"]
    assert lines[rulings[0] + 1] == "      the round now stands: P1 +0, P2 +50; house -50"
    assert lines[rulings[1] + 1] == "      the round now stands: P1 -40, P2 +55; house -15"


def test_a_dealers_soft_total_says_so_as_a_players_does() -> None:
    # A,3,3 read "17" beside a player's "soft 17": whether a soft 17 stood, as the rules say
    # (R-G8), was left to the auditor to work out from the cards.
    # P1 9+9, P2 10+9 stand; the dealer shows an ace and draws a 3 and a 3.
    frames = played_round("9S TH AD 9C 9H 3D 3C", [("stand", "P1", 1), ("stand", "P2", 2)])
    lines = render(frames)
    assert any(line.endswith("the dealer stands on soft 17: A♦ 3♦ 3♣") for line in lines)
    final = lines[lines.index([line for line in lines if line.startswith("v")][-1]) + 1:]
    assert final[0].split() == ["dealer", "A♦", "3♦", "3♣", "soft", "17"]
    assert frames[-1]["state"]["dealer"] == {"cards": ["AD", "3D", "3C"], "total": 17,
                                             "soft": True}
    assert frames[2]["state"]["dealer"]["soft"] is False  # no card yet


def test_a_shoe_abandoned_under_a_round_reads_as_a_sentence() -> None:
    assert sentence("ShoeAbandoned", {"reason": "shoe key lost"}) == (
        "the round's shoe is abandoned (shoe key lost): it takes no more stakes or decisions")


def test_the_dealers_end_reads_as_a_sentence() -> None:
    def finished(total: int, *, bust: bool = False, natural: bool = False) -> str:
        return sentence("DealerFinished", {"total": total, "bust": bust, "natural": natural,
                                           "cards": ["TD", "6C", "9S"]})

    assert finished(25, bust=True) == "the dealer busts on 25: 10♦ 6♣ 9♠"
    assert finished(21, natural=True).startswith("the dealer has a natural, 21: ")
    assert finished(18).startswith("the dealer stands on 18: ")


def test_a_boxs_stakes_read_owner_first_whichever_way_the_frames_came() -> None:
    # Over the API (whose JSON objects have their members sorted) a co-bettor named before the
    # owner in the alphabet was listed first; from the database the owner was.
    import json

    app, r = dealt_round("6S TH 7D 5C", (("zed", 1, 100), ("amy", 1, 20)))
    frames = app.replay(r)
    over_http = json.loads(json.dumps(frames, sort_keys=True))
    boxes = [line for line in render(frames) if line.split()[:2] == ["box", "1"]]
    assert boxes[-1].split()[-4:] == ["zed", "100,", "amy", "20"]
    assert [line for line in render(over_http) if line.split()[:2] == ["box", "1"]] == boxes
