"""Supervision (role ``manager``): table rules for future rounds, voids, rulings."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from api.auth import MANAGER
from api.schemas import ChangeRulesSchema, ReasonSchema, RulingSchema, TableSchema
from api.services import ledger
from api.tables import round_command, rules_from, settings_named
from api.views import Blueprint, actor, guard

blp = Blueprint("supervision", __name__, description="Supervision (manager).")


@blp.route("/tables/<uuid:table_id>/rules", methods=["POST"])
@guard(blp, MANAGER, mutating=True)
@blp.arguments(ChangeRulesSchema())
@blp.response(200, TableSchema)
def change_rules(body: dict[str, Any], table_id: UUID, request_id: str) -> dict[str, Any]:
    """New rules for the table's future rounds: a preset, overrides and limits (R-S1).

    Limits not given stay as they are. A setting out of range is refused naming the field.
    """
    led = ledger()
    with settings_named():
        led.change_rules(request_id, actor(), table_id, rules_from(body),
                         body.get("limits") or {}, body["reason"])
    return led.table(table_id)


round_command(
    blp, "void", "/void", ReasonSchema,
    lambda g, r, a, i, b, v: g.void(r, a, i, b["reason"], expected=v),
    "Void an unfinished round with a reason; every stake is returned (R-V1, R-X13).",
    roles=(MANAGER,))
round_command(
    blp, "record_ruling", "/rulings", RulingSchema,
    lambda g, r, a, i, b, v: g.record_ruling(r, a, i, b["reason"], b["corrects"],
                                             b["adjustments"], expected=v),
    "Record a ruling on a settled round: compensating amounts, never an edit (R-V2).",
    roles=(MANAGER,))
