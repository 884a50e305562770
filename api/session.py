"""``GET /whoami``: which key holder and role a key stands for (every role)."""

from __future__ import annotations

from api.auth import ROLES, current_principal
from api.schemas import WhoAmISchema
from api.views import Blueprint, guard

blp = Blueprint("session", __name__, description="The caller's key.")


@blp.route("/whoami", methods=["GET"])
@guard(blp, *ROLES, errors=(401, 422))  # no database, no path: no 404 nor 503
@blp.response(200, WhoAmISchema)
def whoami() -> dict[str, str]:
    """The name recorded as actor for this key, and its role."""
    principal = current_principal()
    return {"name": principal.name, "role": principal.role}
