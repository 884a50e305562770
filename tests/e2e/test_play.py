"""Rounds played over HTTP in every preset, with the cards steered (tests.scripted)."""

from __future__ import annotations

import json
from typing import Any

from ledger.storage import CHAIN_WALK_ROWS_MAX
from tests.e2e.conftest import NAMES, Desk, Http, problem_of
from tests.scripted import SteeredShuffle


def desk_with(make_app, cards: str, preset: str = "casino", **kwargs) -> Desk:
    app = make_app(SteeredShuffle(cards))
    return Desk(Http(app.test_client()), preset, **kwargs)


def test_a_casino_round_is_played_settled_and_replayed(make_app):
    # P1 19 beats the dealer's 18; P2 17 loses (R-G5).
    desk = desk_with(make_app, "TS TH TD 9S 7C 8D")
    http = desk.http
    r = desk.round()
    state = desk.do("stakes", bettor="P1", box=1, amount=100)
    assert state["phase"] == "betting"
    close = {"decision": "close_betting", "player": "", "box": 0, "hand": 0}
    assert close not in state["legal"]  # a lone player needs two boxes (R-C8)
    state = desk.do("stakes", bettor="P2", box=2, amount=50)
    assert close in state["legal"]
    assert desk.balance("P1") == (900, 100)
    state = desk.do("deal")
    assert state["phase"] == "playing"
    assert state["dealer"]["cards"] == ["TD"]
    assert state["turn"] == {"box": 1, "hand": 0}
    legal = {(d["decision"], d["player"], d["box"]) for d in state["legal"]}
    assert {("stand", "P1", 1), ("hit", "P1", 1), ("double", "P1", 1)} <= legal
    desk.do("stand", player="P1", box=1)
    state = desk.do("stand", player="P2", box=2)
    assert {"decision": "play_dealer", "player": "", "box": 0, "hand": 0} in state["legal"]
    desk.do("dealer")
    state = desk.do("settle")
    assert state["phase"] == "settled"
    assert state["results"] == {"P1": 100, "P2": -50}
    assert state["legal"] == []
    assert desk.balance("P1") == (1100, 0)
    assert desk.balance("P2") == (950, 0)
    house = http.ok(http.get(f"/audit/tables/{desk.table}/house"))
    assert house["available"] == -50
    statement = http.ok(http.get(f"/audit/tables/{desk.table}/house/entries"))["items"]
    assert [(e["type"], e["data"].get("available_delta")) for e in statement] == [
        ("Created", None), ("Posted", -50)]
    assert statement[-1]["data"]["round_id"] == r
    assert http.ok(http.get(f"/audit/rounds/{r}/check")) == {"ok": True, "findings": []}
    events = http.ok(http.get(f"/audit/rounds/{r}/events"))
    assert [e["version"] for e in events] == list(range(1, len(events) + 1))
    assert {e["actor"] for e in events} == {NAMES["dealer"]}
    frames = http.ok(http.get(f"/audit/rounds/{r}/replay"))
    assert [f["event"] for f in frames] == events
    assert frames[-1]["state"] == http.ok(http.get(f"/rounds/{r}"))
    before_deal = http.ok(http.get(f"/audit/rounds/{r}/versions/3"))
    assert before_deal["phase"] == "betting"
    assert len(before_deal["boxes"]) == 2


def test_a_wild21_round_never_shows_the_hole_card_before_the_dealer_plays(make_app):
    # P1 TS 8D = 18 against the dealer's hidden 9H and upcard 7C; the dealer draws to beat
    # 18 (R-W6) and busts with the TC.
    desk = desk_with(make_app, "TS 9H 8D 7C TC", "wild21", players=("P1",))
    http = desk.http
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    live = [desk.do("deal")]
    assert live[0]["dealer"]["cards"] == ["hidden", "7C"]
    assert live[0]["dealer"]["total"] == 7
    live.append(http.ok(http.get(f"/rounds/{r}", role="dealer")))
    live.append(http.ok(http.get(f"/audit/rounds/{r}/events")))
    live.append(http.ok(http.get(f"/audit/rounds/{r}/replay")))
    for version in range(1, live[0]["version"] + 1):
        live.append(http.ok(http.get(f"/audit/rounds/{r}/versions/{version}")))
    assert all("9H" not in json.dumps(view) for view in live)
    desk.do("stand", player="P1", box=1)
    state = desk.do("dealer")
    assert state["dealer"]["cards"] == ["9H", "7C", "TC"]
    state = desk.do("settle")
    assert state["results"] == {"P1": 100}
    assert desk.balance("P1") == (1100, 0)
    events = http.ok(http.get(f"/audit/rounds/{r}/events"))
    assert "9H" in json.dumps(events)  # revealed once the round is over
    assert http.ok(http.get(f"/audit/rounds/{r}/check"))["ok"]


def test_a_casino_wild_round_forfeits_the_other_box_when_a_player_draws_the_wild_card(make_app):
    # P1 9S 5C hits the wild card: 21 (R-W1); P2's box is forfeited at once (R-W2).
    desk = desk_with(make_app, "9S TH 7D 5C 8H W TS", "casino_wild")
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("deal")
    state = desk.do("hit", player="P1", box=1)
    p1, p2 = state["boxes"]
    assert p1["hands"][0]["cards"] == ["9S", "5C", "W"]
    assert p1["hands"][0]["total"] == 21
    assert p2["hands"][0]["status"] == "forfeited"
    assert state["turn"] is None
    desk.do("dealer")
    state = desk.do("settle")
    assert state["results"] == {"P1": 100, "P2": -100}
    assert desk.balance("P2") == (900, 0)
    events = desk.http.ok(desk.http.get(f"/audit/rounds/{r}/events"))
    assert "WildCardDrawn" in {e["type"] for e in events}
    assert desk.http.ok(desk.http.get(f"/audit/rounds/{r}/check"))["ok"]


def test_doubles_splits_and_a_co_bettors_answers_over_http(make_app):
    # Box 1: P1 owns it, P3 rides along; 8 8 split, P3 matches; each 8 stands on its card.
    # Box 2: P2 doubles 6 5 and gets a ten.
    cards = "8S 6H 9D 8C 5H TD 9C TS 9S"
    desk = desk_with(make_app, cards, players=("P1", "P2", "P3"))
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P3", box=1, amount=50)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("stakes/withdraw", bettor="P3", box=1)
    desk.do("stakes", bettor="P3", box=1, amount=40)
    desk.do("deal")
    state = desk.do("split", player="P1", box=1)
    assert state["pending"] == {"kind": "split", "box": 1, "hand": 0, "bettors": ["P3"]}
    assert {d["decision"] for d in state["legal"]} == {"match", "decline", "void"}
    state = desk.do("match", bettor="P3", box=1, hand=0)
    hands = state["boxes"][0]["hands"]
    assert [h["stakes"] for h in hands] == [{"P1": 100, "P3": 40}, {"P1": 100, "P3": 40}]
    desk.do("stand", player="P1", box=1, hand=0)
    desk.do("stand", player="P1", box=1, hand=1)
    state = desk.do("double", player="P2", box=2)
    assert state["boxes"][1]["hands"][0]["doubled"] is True
    state = desk.do("dealer")
    state = desk.do("settle")
    assert state["phase"] == "settled"
    # Dealer 9 9 = 18: hand 0 (8 10 = 18) pushes, hand 1 (8 9 = 17) loses, P2's 21 wins 200.
    assert state["results"] == {"P1": -100, "P2": 200, "P3": -40}
    assert [desk.balance(p) for p in ("P1", "P2", "P3")] == [(900, 0), (1200, 0), (960, 0)]
    house = desk.http.ok(desk.http.get(f"/audit/tables/{desk.table}/house"))
    assert house["available"] == -60
    assert desk.http.ok(desk.http.get(f"/audit/rounds/{r}/check"))["ok"]


def test_a_co_bettor_who_declines_a_split_keeps_his_stake_on_the_first_hand(make_app):
    # The same split, P3 declines (R-C4): his 40 stays on hand 0 alone, nothing more is held.
    cards = "8S 6H 9D 8C 5H TD 9C TS 9S"
    desk = desk_with(make_app, cards, players=("P1", "P2", "P3"))
    desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P3", box=1, amount=40)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("deal")
    desk.do("split", player="P1", box=1)
    state = desk.do("decline", bettor="P3", box=1, hand=0)
    hands = state["boxes"][0]["hands"]
    assert [h["stakes"] for h in hands] == [{"P1": 100, "P3": 40}, {"P1": 100}]
    assert desk.balance("P3") == (960, 40)
    desk.do("stand", player="P1", box=1, hand=0)
    desk.do("stand", player="P1", box=1, hand=1)
    desk.do("double", player="P2", box=2)
    desk.do("dealer")
    state = desk.do("settle")
    assert state["results"] == {"P1": -100, "P2": 200, "P3": 0}  # P3's hand 0 pushed
    assert [desk.balance(p) for p in ("P1", "P2", "P3")] == [(900, 0), (1200, 0), (1000, 0)]


def test_surrender_insurance_and_even_money_over_http(make_app):
    # Round 1: P1 surrenders 15 against a ten (R-C1). Round 2: an ace up; P1 has a natural and
    # takes even money (R-C6), P2 insures (R-C5).
    desk = desk_with(make_app, "TS 9H TD 5S 8C 9C  AS TH AD KS 7C 9D")
    desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("deal")
    state = desk.do("surrender", player="P1", box=1)
    assert state["boxes"][0]["hands"][0]["status"] == "surrendered"
    assert desk.balance("P1") == (950, 0)
    desk.do("stand", player="P2", box=2)
    desk.do("dealer")
    desk.do("settle")
    desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P2", box=2, amount=60)
    state = desk.do("deal")
    decisions = {(d["decision"], d["player"]) for d in state["legal"]}
    assert {("even_money", "P1"), ("insure", "P2")} <= decisions
    desk.do("even-money", bettor="P1", box=1)
    state = desk.do("insurance", bettor="P2", amount=30)
    assert state["insurance"] == {"P2": 30}
    # Even money paid P1's 100 at once, his stake released; P2 holds 60 and the 30 insured.
    assert desk.balance("P1") == (1050, 0)
    assert desk.balance("P2") == (810, 90)


def test_a_manager_voids_a_round_and_rules_on_a_settled_one(make_app):
    desk = desk_with(make_app, "TS TH TD 9S 7C 8D")
    http = desk.http
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("deal")
    state = desk.do("void", role="manager", reason="misdeal")
    assert state["phase"] == "voided"
    assert state["void_reason"] == "misdeal"
    assert desk.balance("P1") == (1000, 0)
    events = http.ok(http.get(f"/audit/rounds/{r}/events"))
    assert events[-1]["actor"] == NAMES["manager"]
    r2 = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=100)
    desk.do("stakes", bettor="P2", box=2, amount=100)
    desk.do("deal")
    for box in (1, 2):
        desk.do("stand", player=f"P{box}", box=box)
    desk.do("dealer")
    desk.do("settle")
    before = desk.balance("P1")[0]
    body = {"reason": "paid short", "corrects": [3], "adjustments": {"P1": 5}}
    answer = http.ok(http.post(f"/rounds/{r2}/rulings", body, role="manager"))
    assert answer["round"]["phase"] == "settled"
    assert answer["round"]["rulings"] == [{k: body[k] for k in ("reason", "corrects",
                                                                 "adjustments")}]
    assert desk.balance("P1")[0] == before + 5


def test_a_manager_changes_the_rules_for_future_rounds_only(make_app):
    desk = desk_with(make_app, "")
    http = desk.http
    r = desk.round()
    old_hash = http.ok(http.get(f"/rounds/{r}"))["rules_hash"]
    desk.do("void", role="manager", reason="table change")
    body = {"preset": "casino_wild",
            "overrides": {"name": "wild evening", "decks": 4, "natural_pays": [6, 5]},
            "limits": {"table_max": 500}, "reason": "wild card evening"}
    table = http.ok(http.post(f"/tables/{desk.table}/rules", body, role="manager"))
    assert table["rules"]["decks"] == 4
    assert table["rules"]["natural_pays"] == [6, 5]
    assert table["limits"]["table_max"] == 500
    assert table["limits"]["table_min"] == 10
    r2 = desk.round()
    assert http.ok(http.get(f"/rounds/{r}"))["rules_hash"] == old_hash
    assert http.ok(http.get(f"/rounds/{r2}"))["rules_hash"] == table["rules_hash"] != old_hash
    # "wild evening v1" stands for those rules now: other payouts need a version of their own.
    desk.do("void", role="manager", reason="payout change")
    other = {**body, "overrides": {"name": "wild evening", "decks": 4, "natural_pays": [7, 5]}}
    refused = http.post(f"/tables/{desk.table}/rules", other, role="manager")
    assert problem_of(refused, 422)["errors"] == {"overrides.version": [
        f"Setting 'overrides.version' is invalid: wild evening v1 stands for other rules already "
        f"(content hash {table['rules_hash']}); give these rules a version of their own."]}
    # A limit is named as the body holds it too: over the table's maximum of 500.
    low = http.post(f"/tables/{desk.table}/rules", {**body, "limits": {"table_min": 600}},
                    role="manager")
    assert problem_of(low, 422)["errors"] == {"limits.table_max": [
        "Setting 'limits.table_max' is invalid: the table maximum 500 is below the table "
        "minimum 600."]}
    assert problem_of(low, 422)["rule"] == "R-X15"  # the table's own settings, kept named
    # One box of one bettor: a player alone, who must play two boxes (R-C8), never dealt.
    solo = {**body, "overrides": {"name": "solo", "bettors_per_box": 1},
            "limits": {"boxes": 1}}
    one = problem_of(http.post(f"/tables/{desk.table}/rules", solo, role="manager"), 422)
    assert (list(one["errors"]), one["rule"]) == (["limits.boxes"], "R-C8")
    assert http.ok(http.get(f"/tables/{desk.table}"))["limits"]["boxes"] == 7
    # One box that bettors share: two players can be dealt there.
    shared = http.ok(http.post(f"/tables/{desk.table}/rules", {**body, "limits": {"boxes": 1}},
                               role="manager"))
    assert shared["limits"]["boxes"] == 1
    # Unless its maximum holds one minimum stake only: a second bettor was refused (R-C8),
    # and every round at the table could only be voided.
    narrow = {**body, "limits": {"boxes": 1, "table_min": 10, "table_max": 15}}
    one = problem_of(http.post(f"/tables/{desk.table}/rules", narrow, role="manager"), 422)
    assert (list(one["errors"]), one["rule"]) == (["limits.table_max"], "R-C8")
    assert "a maximum of at least twice its minimum" in one["errors"]["limits.table_max"][0]


def test_an_auditor_reads_who_put_the_rules_in_force_and_when_a_shoe_was_committed(make_app):
    desk = desk_with(make_app, "")
    http = desk.http
    r = desk.round()
    desk.do("void", role="manager", reason="table change")
    body = {"preset": "casino", "overrides": {"name": "short shoe", "decks": 2},
            "reason": "two decks tonight"}
    http.ok(http.post(f"/tables/{desk.table}/rules", body, role="manager"))
    events = http.ok(http.get(f"/audit/tables/{desk.table}/events", role="auditor"))
    assert [e["type"] for e in events["items"]] == [
        "Created", "ShoeStarted", "RoundStarted", "RulesChanged"]
    changed = events["items"][-1]
    assert (changed["actor"], changed["data"]["reason"]) == ("manager-terminal",
                                                           "two decks tonight")
    assert changed["data"]["rules"]["decks"] == 2
    first = http.ok(http.get(f"/audit/tables/{desk.table}/events", role="auditor", limit=1))
    assert (first["items"], first["next_after"]) == (events["items"][:1], 1)
    shoe = http.ok(http.get(f"/audit/shoes/{http.ok(http.get(f'/rounds/{r}'))['shoe_id']}",
                            role="auditor"))
    assert shoe["committed_at"] <= events["items"][1]["timestamp"]  # before the table took it
    assert "retired_at" not in shoe
    http.ok(http.post(f"/tables/{desk.table}/close", {"reason": "end of shift"}))
    shoe = http.ok(http.get(f"/audit/shoes/{shoe['shoe_id']}", role="auditor"))
    closed = http.ok(http.get(f"/audit/tables/{desk.table}/events", role="auditor",
                              after=4))["items"]
    assert [e["type"] for e in closed] == ["Closed"]
    assert shoe["committed_at"] < shoe["retired_at"] <= closed[0]["timestamp"]


def test_tables_list_their_rounds_a_page_at_a_time(make_app):
    desk = desk_with(make_app, "")
    http = desk.http
    ids = []
    for _ in range(3):
        ids.append(desk.round())
        desk.do("void", role="manager", reason="paging")
    page = http.ok(http.get(f"/tables/{desk.table}/rounds", limit=2))
    assert page == {"items": ids[:0:-1], "next_before": 2}
    page = http.ok(http.get(f"/tables/{desk.table}/rounds", limit=2, before=2))
    assert page == {"items": [ids[0]], "next_before": None}


def test_a_cashier_reads_a_statement_a_page_at_a_time(make_app):
    desk = desk_with(make_app, "", players=("P1",))
    http = desk.http
    for _ in range(3):
        http.ok(http.post("/accounts/P1/buy-in", {"amount": 10}, role="cashier"))
    http.ok(http.post("/accounts/P1/cash-out", {"amount": 25}, role="cashier"))
    first = http.ok(http.get("/accounts/P1/entries", role="cashier", limit=3))
    assert [e["type"] for e in first["items"]] == ["Created", "BoughtIn", "BoughtIn"]
    assert first["next_after"] == 3
    rest = http.ok(http.get("/accounts/P1/entries", role="cashier", after=3, limit=3))
    assert [e["type"] for e in rest["items"]] == ["BoughtIn", "BoughtIn", "CashedOut"]
    assert rest["next_after"] is None  # a full last page says so: no empty page to fetch
    assert {e["actor"] for e in first["items"] + rest["items"]} == {NAMES["cashier"]}
    assert desk.balance("P1") == (1005, 0)
    # Each entry with the balance after it, carried across pages (a cashier had to add the
    # whole history up to tell a player what they had after an entry).
    assert [(e["balance"]["available"], e["balance"]["held"])
            for e in first["items"] + rest["items"]] == [
        (0, 0), (1000, 0), (1010, 0), (1020, 0), (1030, 0), (1005, 0)]


def test_closing_a_table_retires_and_reveals_its_shoe(make_app):
    desk = desk_with(make_app, "TS TH TD 9S 7C 8D")
    http = desk.http
    r = desk.round()
    shoe_id = http.ok(http.get(f"/rounds/{r}"))["shoe_id"]
    live = http.ok(http.get(f"/audit/shoes/{shoe_id}"))
    assert live["retired"] is False
    assert not {"order", "salt", "verified"} & set(live)
    # Refused, not "ok": false, which an alarm takes for a failed check.
    live_check = problem_of(http.get(f"/audit/shoes/{shoe_id}/verification"), 422)
    assert (live_check["error"], live_check["rule"]) == ("ShoeLive", "R-H2")
    assert live_check["detail"].startswith(f"Shoe {shoe_id} is still live: its order is ")
    desk.do("stakes", bettor="P1", box=1, amount=10)
    desk.do("stakes", bettor="P2", box=2, amount=10)
    desk.do("deal")
    desk.do("void", role="manager", reason="closing early")
    table = http.ok(http.post(f"/tables/{desk.table}/close", {"reason": "end of shift"}))
    assert table["open"] is False
    shoe = http.ok(http.get(f"/audit/shoes/{shoe_id}"))
    assert shoe["retired"]
    assert shoe["retired_reason"] == "table closed"  # recorded, and now shown (R-H4)
    assert shoe["verified"]
    assert shoe["order"][:5] == ["TS", "TH", "TD", "9S", "7C"]
    assert http.ok(http.get(f"/audit/shoes/{shoe_id}/verification")) == {"ok": True,
                                                                       "findings": []}
    table = http.ok(http.post(f"/tables/{desk.table}/reopen"))
    assert table["open"] is True
    again = problem_of(http.post(f"/tables/{desk.table}/reopen"), 422)
    assert (again["error"], again["rule"], again["detail"]) == (
        "TableOpen", None, "Table T1 is open already.")
    # A reopening may say why, as a closing must (it was refused: "reason: Unknown field").
    http.ok(http.post(f"/tables/{desk.table}/close", {"reason": "a break"}))
    http.ok(http.post(f"/tables/{desk.table}/reopen", {"reason": "new shift"}))
    blank = problem_of(http.post(f"/tables/{desk.table}/reopen", {"reason": " "}), 422)
    assert "reason" in blank["errors"]
    events = http.ok(http.get(f"/audit/tables/{desk.table}/events"))["items"]
    reopened = [e["data"]["reason"] for e in events if e["type"] == "Reopened"]
    assert reopened == ["", "new shift"]


def test_the_event_store_chain_verifies_and_its_head_moves_with_each_event(make_app):
    desk = desk_with(make_app, "")
    http = desk.http
    report = http.ok(http.get("/audit/chain"))
    assert report["intact"]
    assert report["findings"] == []
    head = http.ok(http.get("/audit/chain/head"))
    assert head == {"notification_id": report["head_notification_id"], "head": report["head"]}
    assert http.ok(http.get("/audit/chain", expected_head=head["head"]))["intact"]
    desk.round()
    # Without its notification id, the kept head is found where it was kept.
    moved = http.ok(http.get("/audit/chain", expected_head=head["head"]))
    assert (moved["intact"], moved["kept_head_at"]) == (True, head["notification_id"])
    assert moved["head_notification_id"] > head["notification_id"]
    # Taken at its notification id, the kept head still proves everything up to it.
    kept = {"expected_head": head["head"], "expected_at": head["notification_id"]}
    since = http.ok(http.get("/audit/chain", **kept))
    assert since["kept_head_checked"]
    assert since["intact"], since["findings"]
    assert since["head_notification_id"] > head["notification_id"]
    other = http.ok(http.get("/audit/chain", **{**kept, "expected_head": "0" * 64}))
    assert other["findings"] == [
        f"the link at notification {head['notification_id']} is {head['head']}, not the "
        f"{'0' * 64} kept outside: the record up to it was altered"]
    alone = problem_of(http.get("/audit/chain", expected_at=head["notification_id"]), 422)
    assert "expected_at" in alone["errors"]
    behind = problem_of(http.get("/audit/chain", after=head["notification_id"] + 1, **kept), 422)
    assert "expected_at" in behind["errors"]
    onwards = http.ok(http.get("/audit/chain", after=head["notification_id"], **kept))
    assert onwards["intact"], onwards["findings"]


def test_a_long_chain_is_walked_in_parts_that_add_up_to_the_whole(make_app):
    desk = desk_with(make_app, "")
    http = desk.http
    desk.round()
    whole = http.ok(http.get("/audit/chain"))
    assert (whole["complete"], whole["next_after"]) == (True, None)
    parts: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        part = http.ok(http.get("/audit/chain", after=after, limit=4,
                                expected_head=whole["head"]))
        assert part["intact"], part["findings"]
        assert part["rows"] <= 4
        parts.append(part)
        after = part["next_after"]
    assert len(parts) == -(-whole["rows"] // 4)
    assert sum(p["rows"] for p in parts) == whole["rows"]
    assert [p["complete"] for p in parts] == [False] * (len(parts) - 1) + [True]
    assert [p["from_start"] for p in parts] == [True] + [False] * (len(parts) - 1)
    assert (parts[-1]["head"], parts[-1]["head_notification_id"]) == (
        whole["head"], whole["head_notification_id"])
    problem = http.get("/audit/chain", limit=CHAIN_WALK_ROWS_MAX + 1)
    assert "limit" in problem_of(problem, 422)["errors"]
    # A start that is no event is the walk's argument at fault, not an altered record: it
    # answered intact false, which an auditor's alarm takes for an altered record.
    past = whole["head_notification_id"] + 10
    nowhere = problem_of(http.get("/audit/chain", after=past), 422)
    assert (nowhere["error"], list(nowhere["errors"])) == ("QueryRefused", ["after"])
    assert nowhere["detail"].startswith(f"There is no event at notification {past} to start")


def test_whoami_names_the_key_holder_and_role(http):
    for role, name in NAMES.items():
        assert http.ok(http.get("/whoami", role=role)) == {"name": name, "role": role}
