"""The auditor's views never reveal a live shoe, nor a face-down card, on any route."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

from flask import Flask

from ledger.aggregates.shoe import ShoeRecord
from tests.e2e.conftest import NAMES, Desk, Http
from tests.e2e.routes import fill, param_names, routes
from tests.e2e.test_roles import expected_table
from tests.scripted import SteeredShuffle

SECRET_KEYS = {"order", "salt", "sealed_order"}
HOLE = "9H"
NEXT = "2C 3D 4S 5H 6C"  # the shoe's next cards after the round below


def keys_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_in(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_in(v)}
    return set()


def live_tables(app: Flask) -> tuple[Http, dict[str, list[Any]]]:
    """A wild21 table mid-round (hole card down) and a casino table with a settled round."""
    http = Http(app.test_client())
    wild = Desk(http, "wild21", players=("P1",), name="W")
    live = wild.round()
    wild.do("stakes", bettor="P1", box=1, amount=100)
    wild.do("deal")
    settled_desk = Desk(http, "casino", players=("P2", "P3"), name="C")
    settled = settled_desk.round()
    settled_desk.do("stakes", bettor="P2", box=1, amount=10)
    settled_desk.do("stakes", bettor="P3", box=2, amount=10)
    settled_desk.do("deal")
    for box, player in ((1, "P2"), (2, "P3")):
        if http.ok(http.get(f"/rounds/{settled}"))["turn"]:
            settled_desk.do("stand", player=player, box=box)
    settled_desk.do("dealer")
    settled_desk.do("settle")
    betting = settled_desk.round()
    rounds = [live, settled, betting]
    shoes = [http.ok(http.get(f"/rounds/{r}"))["shoe_id"] for r in rounds]
    versions = range(1, max(http.ok(http.get(f"/rounds/{r}"))["version"] for r in rounds) + 1)
    return http, {"round_id": rounds, "table_id": [wild.table, settled_desk.table],
                  "shoe_id": shoes, "player": ["P1", "P2", "P3"], "version": list(versions)}


def test_no_auditor_view_shows_a_live_shoe_or_a_face_down_card(make_app):
    # wild21 deals box 1, the dealer's face-down card, box 1, the dealer's upcard.
    app = make_app(SteeredShuffle(f"TS {HOLE} 8D 7C {NEXT}", f"TS TH TD 9S 7C 8D {NEXT}"))
    http, values = live_tables(app)
    led = app.extensions["pitboss"].ledger()
    sealed = {led.repository.get(s).sealed_order for s in set(values["shoe_id"])}
    assert all(isinstance(led.repository.get(s), ShoeRecord) for s in set(values["shoe_id"]))
    table = expected_table(app)
    seen: set[tuple[str, str]] = set()
    for (method, rule), roles in table.items():
        if method != "GET" or "auditor" not in roles:
            continue
        for path in _paths(rule, values):
            response = http.get(path)
            assert response.status_code < 500, path
            text = response.get_data(as_text=True)
            body = json.loads(text)
            assert not SECRET_KEYS & keys_in(body), path
            assert not any(s in text for s in sealed), path
            assert HOLE not in text, path
            assert NEXT.split()[0] + '"' not in text.replace(" ", ""), path
            seen.add((method, rule))
    auditor_gets = {k for k, roles in table.items() if k[0] == "GET" and "auditor" in roles}
    assert seen == auditor_gets
    assert {e["actor"] for e in http.ok(http.get(f"/audit/rounds/{values['round_id'][0]}/events"))
            } == {NAMES["dealer"]}


def _paths(rule: str, values: dict[str, list[Any]]) -> list[str]:
    names = param_names(rule)
    if not names:
        return [rule]
    paths = [rule]
    for name in names:
        paths = [fill_one(p, name, v) for p in paths for v in values[name]]
    return paths


def fill_one(rule: str, name: str, value: Any) -> str:
    return fill(rule, _Partial(name, value))


class _Partial(dict[str, Any]):
    """Fills one parameter and leaves the others as they are."""

    def __init__(self, name: str, value: Any) -> None:
        super().__init__()
        self._name, self._value = name, value

    def __getitem__(self, key: str) -> Any:
        return self._value if key == self._name else f"<{key}>"


def test_the_filler_keeps_other_parameters(make_app):
    assert fill_one("/a/<uuid:x>/<int:y>", "x", 1) == "/a/1/<y>"
    assert list(routes(make_app()))


def test_a_face_down_wild_card_stays_secret_until_its_shoe_is_retired(make_app):
    from tests.e2e.test_reports import catch_up

    app = make_app(SteeredShuffle(f"TS W 8D 7C {NEXT}"))  # the dealer's hole card is wild
    http = Http(app.test_client())
    wild = Desk(http, "wild21", players=("P1",), name="W")
    r = wild.round()
    wild.do("stakes", bettor="P1", box=1, amount=100)
    wild.do("deal")

    def hole() -> tuple[dict[str, Any], dict[str, Any]]:
        events = http.ok(http.get(f"/audit/rounds/{r}/events"))
        frames = http.ok(http.get(f"/audit/rounds/{r}/replay"))
        (down,) = [e for e in events if e["data"].get("face_up") is False]
        assert frames[down["version"] - 1]["event"] == down
        return down, frames[-1]["state"]

    for moment in ("live", "voided"):
        down, state = hole()
        assert (down["type"], down["data"]["card"]) == ("CardDealt", "hidden"), moment
        # Nor does the database hold its face, for whoever reads the table (the auditor role).
        stored = app.extensions["pitboss"].ledger().recorder.select_events(UUID(r))
        assert not [e for e in stored if b'"W"' in bytes(e.state)], moment
        assert "hidden" in state["dealer"]["cards"], moment
        catch_up(app)
        assert http.ok(http.get("/audit/rounds", wild_card="true"))["items"] == [], moment
        if moment == "live":
            wild.do("void", role="manager", reason="misdeal")  # the hole is never turned over
    http.ok(http.post(f"/tables/{wild.table}/close", {"reason": "end of shift"}))
    # The deal recorded the card without its face, and never turned over it has none in the
    # round's record; the retired shoe's order, public now, has it at the recorded position.
    down, _ = hole()
    assert (down["type"], down["data"]["card"]) == ("CardDealt", "hidden")
    shoe = http.ok(http.get(f"/audit/shoes/{down['data']['shoe_id']}"))
    assert shoe["order"][down["data"]["position"]] == "W"


def test_a_rounds_postings_are_listed_on_every_account_with_whose_it_is(make_app):
    # To check one disputed round, an auditor read the whole statement of each bettor and of
    # the table's house; and a posting naming it on a stranger's account showed only as a
    # finding of the round check.
    from eventsourcing.persistence import StoredEvent

    from ledger.aggregates import ids
    from ledger.aggregates.account import Account
    from tests.faults import append_around_the_ledger

    # P2 and P3 stand on 17 and lose to the dealer's 18: the house takes 20.
    app = make_app(SteeredShuffle(f"TS {HOLE} 8D 7C {NEXT}", f"TS TH TD 7S 7C 8D {NEXT}"))
    http, values = live_tables(app)
    _, settled, _ = values["round_id"]
    state = http.ok(http.get(f"/rounds/{settled}"))
    assert (state["results"], state["house_result"]) == ({"P2": -10, "P3": -10}, 20)
    postings = http.ok(http.get(f"/audit/rounds/{settled}/postings"))
    assert {(p["owner"], p["kind"]) for p in postings} == {
        ("P2", "player"), ("P3", "player"), ("house:C", "house")}
    for player in ("P2", "P3"):  # what the statement shows of the round, posting by posting
        statement = http.ok(http.get(f"/accounts/{player}/entries"))["items"]
        naming = [{k: e[k] for k in ("version", "type", "data")} for e in statement
                  if e["data"].get("round_id") == str(settled)]
        assert [{k: p[k] for k in ("version", "type", "data")} for p in postings
                if p["owner"] == player] == naming
        assert sum(p["data"]["available_delta"] + p["data"]["held_delta"] for p in postings
                   if p["owner"] == player) == state["results"][player]
    assert sum(p["data"]["available_delta"] for p in postings if p["kind"] == "house") \
        == state["house_result"]
    led = app.extensions["pitboss"].ledger()
    stranger: Any = led.repository.get(ids.account_id("P1"))
    append_around_the_ledger(led, Account.Posted(  # type: ignore[call-arg]
        originator_id=stranger.id, originator_version=stranger.version + 1,
        timestamp=stranger.modified_on, round_id=UUID(str(settled)), held_delta=0,
        available_delta=5, memo="StakeSettled", actor="dealer", request_id="forged"))
    (forged,) = [p for p in http.ok(http.get(f"/audit/rounds/{settled}/postings"))
                 if p["owner"] == "P1"]
    assert (forged["account_id"], forged["data"]["available_delta"]) == (str(stranger.id), 5)
    (finding,) = http.ok(http.get(f"/audit/rounds/{settled}/check"))["findings"]
    assert "P1's account, which has no part in it," in finding
    # An account whose opening does not decode (written around the ledger): listed, its
    # owner unknown, where the route answered a 500.
    nowhere = uuid4()
    append_around_the_ledger(led, StoredEvent(
        originator_id=nowhere, originator_version=1, topic=Account.Created.TOPIC, state=b"{}"),
        Account.Posted(  # type: ignore[call-arg]
            originator_id=nowhere, originator_version=2, timestamp=stranger.modified_on,
            round_id=UUID(str(settled)), held_delta=0, available_delta=7, memo="StakeSettled",
            actor="dealer", request_id="forged-2"))
    (unknown,) = [p for p in http.ok(http.get(f"/audit/rounds/{settled}/postings"))
                  if p["account_id"] == str(nowhere)]
    assert (unknown["owner"], unknown["kind"], unknown["data"]["available_delta"]) == (
        None, None, 7)
    # The round check names it so, where it answered only that the round does not replay.
    findings = http.ok(http.get(f"/audit/rounds/{settled}/check"))["findings"]
    said = f"on {nowhere}, whose opening does not decode, which has no part in it, move 7"
    assert any(said in finding for finding in findings), findings
