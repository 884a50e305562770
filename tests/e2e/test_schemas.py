"""Response schemas: the declared shape of the ledger's answers, and nothing more."""

from __future__ import annotations

import json
from uuid import UUID, uuid4

from api.schemas import FrameSchema, ShoeSchema, TableSchema
from tests.e2e.conftest import Desk, Http
from tests.scripted import SteeredShuffle


def test_the_schemas_declare_every_field_the_ledger_answers_with(make_app):
    app = make_app(SteeredShuffle("8S TH 9D 8H 9C 8D 3C 2C TD"))
    desk = Desk(Http(app.test_client()))
    r = desk.round()
    desk.do("stakes", bettor="P1", box=1, amount=10)
    desk.do("stakes", bettor="P2", box=2, amount=10)
    desk.do("deal")
    desk.do("split", player="P1", box=1)
    led = app.extensions["pitboss"].ledger()
    frames = led.replay(UUID(r))
    assert FrameSchema(many=True).dump(frames) == json.loads(json.dumps(frames))
    table = led.table(UUID(desk.table))
    assert TableSchema().dump(table) == json.loads(json.dumps(table))


def test_a_field_the_schema_does_not_declare_never_leaves():
    shoe = {"shoe_id": str(uuid4()), "table_id": str(uuid4()), "shoe_no": 1, "size": 312,
            "cut": 234, "position": 5, "commitment": "c0ffee", "retired": False,
            "sealed_order": "secret"}
    dumped = ShoeSchema().dump(shoe)
    assert set(dumped) == set(shoe) - {"sealed_order"}
