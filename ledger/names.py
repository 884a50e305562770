"""How the names the ledger records are written: a player's, a table's, an actor's. RULES.md
has no rule on names, so a refusal cites none; it names the field at fault."""

from __future__ import annotations

import unicodedata

from ledger.errors import NameRefused

NAME_MAX_CHARS = 64


def check_name(what: str, name: str, field: str | None = None) -> None:
    """A name is 1 to NAME_MAX_CHARS printable characters without surrounding spaces."""
    if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX_CHARS \
            or not name.isprintable() or name != name.strip():
        raise NameRefused(f"A {what} is 1 to {NAME_MAX_CHARS} printable characters without "
                          "surrounding spaces.", field=field)


def check_new_name(what: str, name: str, field: str) -> None:
    """A name given to something new is written one way only (Unicode NFC) and starts with a
    character of its own: ids are made from names, and "Café" written two ways would name
    two tables that look the same. (Checked where names are given, not where they are used:
    a name recorded before stays usable.)"""
    if unicodedata.normalize("NFC", name) != name or unicodedata.combining(name[0]):
        raise NameRefused(f"A {what} is written in composed form (Unicode NFC) and does not "
                          "start with an accent.", field=field)
