"""The read-model routes over HTTP, once the projections have caught up with the ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from projections.settings import GamingDay
from tests.e2e.conftest import Desk, Http, problem_of
from tests.scripted import SteeredShuffle


def catch_up(app) -> None:
    from projections.engine import Engine

    with Engine(app.extensions["pitboss"].env) as engine:
        engine.catch_up(1000)


@pytest.fixture
def played(make_app):
    """Two settled rounds and one voided at a casino_wild table; the projections caught up."""
    app = make_app(SteeredShuffle("TS TH TD 9S 7C 8D 2C 3C 4C 5C 6C 7H"))
    desk = Desk(Http(app.test_client()), "casino_wild")
    rounds = []
    for _ in range(2):
        rounds.append(desk.round())
        desk.do("stakes", bettor="P1", box=1, amount=100)
        desk.do("stakes", bettor="P2", box=2, amount=50)
        state = desk.do("deal")
        while state["turn"] is not None:
            box = state["turn"]["box"]
            state = desk.do("stand", player=f"P{box}", box=box, hand=state["turn"]["hand"])
        desk.do("dealer")
        desk.do("settle")
    rounds.append(desk.round())
    desk.do("void", role="manager", reason="reports")
    catch_up(app)
    return app, desk, rounds


def test_rounds_are_searched_by_table_player_and_status_a_page_at_a_time(played):
    _, desk, rounds = played
    http = desk.http
    page = http.ok(http.get("/audit/rounds", table_id=desk.table, limit=2))
    assert [r["round_id"] for r in page["items"]] == rounds[:0:-1]
    assert page["next_cursor"]
    rest = http.ok(http.get("/audit/rounds", table_id=desk.table, limit=2,
                            cursor=page["next_cursor"]))
    assert [r["round_id"] for r in rest["items"]] == [rounds[0]]
    assert rest["next_cursor"] is None
    settled = http.ok(http.get("/audit/rounds", status="settled", player="P2"))
    assert {r["round_id"] for r in settled["items"]} == set(rounds[:2])
    voided = http.ok(http.get("/audit/rounds", status="voided", role="manager"))
    assert [r["round_id"] for r in voided["items"]] == [rounds[2]]
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert len(http.ok(http.get("/audit/rounds", started_from=since))["items"]) == 3


def test_balances_house_results_and_the_balance_check_agree_with_the_ledger(played):
    _, desk, _ = played
    http = desk.http
    p1 = http.ok(http.get("/audit/balances", player="P1"))["items"]
    assert [(b["owner"], b["available"], b["held"]) for b in p1] == [
        ("P1", *desk.balance("P1"))]
    everyone = http.ok(http.get("/audit/balances", limit=500))["items"]
    assert {"P1", "P2"} <= {b["owner"] for b in everyone}
    house = http.ok(http.get("/audit/house"))
    ledger_house = http.ok(http.get(f"/audit/tables/{desk.table}/house"))
    assert [(h["table_id"], h["result"]) for h in house["items"]] == [
        (desk.table, ledger_house["available"])]
    assert house["next_cursor"] is None
    check = http.ok(http.get("/audit/balances/check"))
    assert {k: check[k] for k in ("ok", "findings", "complete", "next_cursor")} == {
        "ok": True, "findings": [], "complete": True, "next_cursor": None}
    assert check["accounts_checked"] >= 3  # P1, P2 and the house at least
    assert (check["position"], check["lag_events"]) == (check["ledger_head"], 0)
    # The check speaks for what the view has read, and says how far that is.
    http.ok(http.post("/accounts/P1/buy-in", {"amount": 5}, role="cashier"))
    later = http.ok(http.get("/audit/balances/check"))
    assert later["ok"]
    assert later["position"] == check["position"] < later["ledger_head"]
    assert later["lag_events"] >= 1
    assert "cursor" in problem_of(http.get("/audit/balances/check", cursor="W10"),
                                  422)["errors"]


def test_a_table_day_report_and_the_projection_lag(played):
    _, desk, _ = played
    http = desk.http
    today = datetime.now(UTC).date()
    days = http.ok(http.get(f"/audit/tables/{desk.table}/report",
                            **{"from": (today - timedelta(days=1)).isoformat(),
                               "to": (today + timedelta(days=1)).isoformat()}))
    assert sum(d["rounds_settled"] for d in days) == 2
    assert sum(d["rounds_voided"] for d in days) == 1
    for day in days:  # the rounds behind each day, whose sums its figures are
        rounds = http.ok(http.get(f"/audit/tables/{desk.table}/report/rounds",
                                  day=day["gaming_day"], limit=1))
        items, cursor = rounds["items"], rounds["next_cursor"]
        while cursor is not None:
            more = http.ok(http.get(f"/audit/tables/{desk.table}/report/rounds",
                                    day=day["gaming_day"], limit=1, cursor=cursor))
            items, cursor = items + more["items"], more["next_cursor"]
        assert rounds["complete"]
        assert len(items) == rounds["rounds_listed"]
        assert (rounds["figures"]["house_win"], rounds["figures"]["rounds_voided"]) == (
            day["house_win"], day["rounds_voided"]) == (sum(r["house_win"] for r in items),
                                                        sum(r["voided"] for r in items))
    # The desk's day: the gaming day (06:00 UTC by default) of the players' buy-ins.
    gaming_day = GamingDay().day_of(datetime.now(UTC))
    today_at_desk = http.ok(http.get("/audit/cashier", day=gaming_day.isoformat(), limit=1))
    for day in (gaming_day - timedelta(days=1), gaming_day + timedelta(days=1)):
        assert http.ok(http.get("/audit/cashier", day=day.isoformat()))["items"] == []
    assert today_at_desk["complete"]
    assert today_at_desk["movements_listed"] == sum(
        t["buy_ins"] + t["cash_outs"] for t in today_at_desk["currencies"]) >= 2
    assert today_at_desk["next_cursor"] is not None
    for query, field in (({}, "day"), ({"day": "2025-13-01"}, "day"),
                         ({"day": today.isoformat(), "limit": 0}, "limit"),
                         ({"day": today.isoformat(), "cursor": "W10"}, "cursor")):
        assert field in problem_of(http.get("/audit/cashier", **query), 422)["errors"]
    positions = http.ok(http.get("/audit/projections"))
    assert positions
    assert all(p["lag_events"] == 0 for p in positions)
    desk.round()
    assert any(p["lag_events"] > 0 for p in http.ok(http.get("/audit/projections")))


@pytest.mark.parametrize(("query", "field"), [
    ({"limit": 201}, "limit"), ({"status": "lost"}, "status"),
    ({"started_from": "2025-01-01T00:00:00"}, "started_from"),
    ({"started_from": "2025-01-02T00:00:00Z", "started_to": "2025-01-01T00:00:00Z"},
     "started_to"),
    ({"wild_card": "yes"}, "wild_card"), ({"table_id": "T1"}, "table_id"),
    # Outside the years a datetime holds once taken to UTC: these were 500s.
    ({"started_to": "9999-12-31T23:59:59-14:00"}, "started_to"),
    ({"started_from": "0001-01-01T00:00:00+14:00"}, "started_from"),
    ({"started_from": "0001-01-01T00:00:00+00:01", "player": "P1"}, "started_from"),
])
def test_a_search_off_its_schema_is_422_naming_the_field(http, query, field):
    assert field in problem_of(http.get("/audit/rounds", **query), 422)["errors"]


def test_a_search_flag_not_in_lower_case_is_refused_saying_how_to_write_it(http):
    # A client's True (Python's booleans in a query string) was "Not a valid boolean."
    said = problem_of(http.get("/audit/rounds", wild_card="True"), 422)["errors"]
    assert said == {"wild_card": ["Not a boolean: true or false, in lower case."]}


def test_a_search_time_finer_than_the_record_is_refused_not_cut(http):
    # Cut to the microsecond: a bound of .3212875 took in a round started at .321287, before it.
    said = problem_of(http.get("/audit/rounds", started_to="2025-01-01T00:00:00.0000005Z"), 422)
    assert said["errors"] == {"started_to": [
        "A time is given to the microsecond at most (6 digits after the second), as the "
        "record keeps it."]}
    assert "items" in http.ok(http.get("/audit/rounds", started_to="2025-01-01T00:00:00.000001Z"))


def test_a_search_time_may_write_its_t_and_z_in_lower_case(http):
    # RFC 3339 allows them: 2026-11-30t06:00:00z was refused, while a space for the T was not.
    lower = http.ok(http.get("/audit/rounds", started_from="2025-01-01t00:00:00z"))
    assert lower == http.ok(http.get("/audit/rounds", started_from="2025-01-01T00:00:00Z"))


@pytest.mark.parametrize("moment", ["2025-01-01", "2025-01-01T00:00:00",
                                    "2025-01-01T00:00:00 01:00"])
def test_a_search_time_without_its_zone_is_refused_with_the_form_it_takes(http, moment):
    # A day alone, no zone, or a + a query string turned into a space: "Not a valid datetime."
    (said,) = problem_of(http.get("/audit/rounds", started_from=moment), 422)["errors"][
        "started_from"]
    assert said.startswith("An ISO 8601 time with its zone, as 2026-11-30T06:00:00Z")
    assert "written %2B" in said


@pytest.mark.parametrize(("path", "key"), [
    ("/audit/rounds", None),
    ("/audit/balances", ["balances", "a\ud800", "00000000-0000-0000-0000-000000000000"]),
    ("/audit/balances", ["balances", "a\u0000b", "00000000-0000-0000-0000-000000000000"]),
    ("/audit/balances", ["balances", "zzzz", "00000000-0000-0000-0000-000000000000"]),
    # Past the end: unsigned, it answered complete and ok, having checked nothing.
    ("/audit/balances/check", ["balance-check", "openings", "9223372036854775807", "0"]),
])
def test_a_cursor_it_did_not_give_out_is_refused_naming_the_cursor(http, path, key):
    import base64
    import json

    cursor = "bm9wZQ" if key is None else base64.urlsafe_b64encode(
        json.dumps(key).encode()).decode().rstrip("=")
    body = problem_of(http.get(path, cursor=cursor), 422)
    assert "cursor" in body["errors"]
    assert (body["error"], body["title"]) == ("QueryRefused", "Query refused")


def test_a_report_range_is_checked(http, make_app):
    import uuid

    path = f"/audit/tables/{uuid.uuid4()}/report"
    assert "to" in problem_of(http.get(path, **{"from": "2025-02-01", "to": "2025-01-01"}),
                              422)["errors"]
    # A leap year is the longest report: 366 days pass the range check (an unknown table is
    # then 404), 367 do not, refused by the schema before the read models are asked.
    assert problem_of(http.get(path, **{"from": "2024-01-01", "to": "2024-12-31"}),
                      404)["rule"] is None
    too_long = problem_of(http.get(path, **{"from": "2024-01-01", "to": "2025-01-01"}), 422)
    assert too_long["errors"] == {"to": ["A report covers at most 366 days."]}
    assert too_long["error"] == "InvalidRequest"
    assert problem_of(http.get(path, **{"from": "2025-01-01", "to": "2025-01-02"}),
                      404)["rule"] is None
    for edge in ("0001-01-01", "9999-12-30"):  # days whose bounds may leave the calendar
        assert "from" in problem_of(http.get(path, **{"from": edge, "to": edge}),
                                    422)["errors"]
    for query, field in (({}, "day"), ({"day": "2025-02-30"}, "day"),
                         ({"day": "9999-12-30"}, "day"), ({"day": "2025-01-01", "limit": 501},
                                                          "limit")):
        assert field in problem_of(http.get(f"{path}/rounds", **query), 422)["errors"]
    assert problem_of(http.get(f"{path}/rounds", day="2025-01-01"), 404)["rule"] is None
    # Written as the document says: 20250301 was taken (Python's parser reads it) as were
    # 2025-W10-1 and 2025-060.
    for written in ("20250301", "2025-W10-1", "2025-060"):
        said = problem_of(http.get("/audit/cashier", day=written), 422)["errors"]
        assert said == {"day": ["A gaming day is a calendar date written as 2025-03-01."]}
        assert "from" in problem_of(http.get(path, **{"from": written, "to": "2025-03-02"}),
                                    422)["errors"]


def test_a_nul_character_anywhere_is_a_422_not_a_database_error(http):
    # (in a cursor: see test_a_cursor_it_did_not_give_out_is_refused_naming_the_cursor)
    assert "player" in problem_of(http.get("/audit/balances", player="a\x00b"), 422)["errors"]
    assert "player" in problem_of(http.get("/audit/rounds", player="a\x00b"), 422)["errors"]


@pytest.mark.parametrize("path", ["/audit/balances", "/audit/rounds"])
def test_a_plus_a_query_string_turned_into_a_space_is_refused_not_found_nowhere(http, path):
    # "?player=ann+vip" arrives as "ann vip", which no player id holds: it answered an empty
    # page, and an auditor read that ann+vip had no balance and no rounds.
    (said,) = problem_of(http.get(path, player="ann vip"), 422)["errors"]["player"]
    assert said.startswith("Not a valid player id")
    assert "written %2B" in said
    assert http.ok(http.get(path, player="ann+vip"))["items"] == []


def test_balances_page_through_owners_with_the_longest_names_in_any_script(make_app):
    app = make_app()
    http = Http(app.test_client())
    http.ok(http.post("/accounts", {"player": "a" * 64}, role="cashier"), 201)
    tables = ["桌" * 64, "🂡" * 64, "Ω" * 64]  # a house account each, named after its table
    for name in tables:
        http.ok(http.post("/tables", {"name": name, "preset": "casino"}), 201)
    owners = ["a" * 64, *(f"house:{name}" for name in tables)]
    catch_up(app)
    for path, key, expected in (("/audit/balances", "owner", owners),
                                ("/audit/house", "table_name", tables)):
        seen, cursor = [], None
        while True:
            page = http.ok(http.get(path, limit="1",
                                    **({} if cursor is None else {"cursor": cursor})))
            seen += [item[key] for item in page["items"]]
            if (cursor := page["next_cursor"]) is None:
                break
        assert sorted(seen) == sorted(expected)


def test_a_cursor_of_one_list_is_refused_by_another(played):
    _, desk, _ = played
    http = desk.http
    rounds_cursor = http.ok(http.get("/audit/rounds", limit=1))["next_cursor"]
    balances_cursor = http.ok(http.get("/audit/balances", limit=1))["next_cursor"]
    assert "cursor" in problem_of(http.get("/audit/balances", cursor=rounds_cursor),
                                  422)["detail"]
    assert "cursor" in problem_of(http.get("/audit/rounds", cursor=balances_cursor),
                                  422)["detail"]
    assert "cursor" in problem_of(http.get("/audit/house", cursor=balances_cursor),
                                  422)["detail"]


def test_a_cursor_holds_for_the_filters_that_gave_it_out_only(played):
    # An auditor who changed a filter mid-walk went on from the old list's place in the new
    # one, skipping rounds unseen.
    _, desk, _ = played
    http = desk.http
    first = http.ok(http.get("/audit/rounds", limit=1, status="settled"))
    cursor = first["next_cursor"]
    refused = problem_of(http.get("/audit/rounds", limit=1, cursor=cursor), 422)
    assert refused["errors"] == {"cursor": [
        "The cursor was given out for this list under other filters: send the filters of the "
        "first page with it, or start again without it."]}
    assert problem_of(http.get("/audit/rounds", limit=1, cursor=cursor, status="settled",
                               player="P1"), 422)["errors"] == refused["errors"]
    # The same filters, another page size, and the time bound written in another zone: taken.
    later = http.ok(http.get("/audit/rounds", limit=5, cursor=cursor, status="settled"))
    assert [r["round_id"] for r in later["items"]] != [r["round_id"] for r in first["items"]]
    since = {"started_from": "2000-01-01T00:00:00+00:00"}
    cursor = http.ok(http.get("/audit/rounds", limit=1, **since))["next_cursor"]
    http.ok(http.get("/audit/rounds", limit=1, cursor=cursor,
                     started_from="2000-01-01T01:00:00+01:00"))
    cursor = http.ok(http.get("/audit/balances", limit=1))["next_cursor"]
    assert problem_of(http.get("/audit/balances", limit=1, cursor=cursor, player="P1"),
                      422)["errors"] == refused["errors"]


def test_read_models_without_a_table_of_this_version_answer_503_naming_it(
        app, http, database, caplog):
    # The service started on an upgraded database before the owner's start made this
    # version's tables: the audit reads answered a bare 500, the lag check among them (which
    # needs none of them).
    schema = app.config["EVENTSOURCING_ENV"]["POSTGRES_SCHEMA"]
    http.ok(http.get("/audit/balances"))
    with psycopg.connect(database.conninfo(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "balances_settings")))
    http.ok(http.get("/audit/projections"))  # the lag check reads the tracking tables alone
    for path in ("/audit/balances", "/audit/cashier?day=2026-01-01"):
        answer = http.get(path)
        body = problem_of(answer, 503)
        assert body["error"] == "ReadModelsNotMade"
        assert body["detail"] == ("The read models lack this version's tables balances_settings: "
                                  "start pitboss once as the database owner, which makes them "
                                  "(README: Upgrading).")
        assert answer.headers["Retry-After"]
    assert "balances_settings" in caplog.text
    http.ok(http.get("/audit/rounds"))  # a read model whole still answers
