"""How the names the ledger records are written: a player's, a table's, an actor's. RULES.md
has no rule on names, so a refusal cites none; it names the field at fault."""

from __future__ import annotations

import unicodedata
from typing import TypeGuard

from ledger.errors import NameRefused

NAME_MAX_CHARS = 64


def is_name(name: object) -> TypeGuard[str]:
    """1 to NAME_MAX_CHARS printable characters without surrounding spaces."""
    return isinstance(name, str) and 1 <= len(name) <= NAME_MAX_CHARS \
        and name.isprintable() and name == name.strip()


def written_one_way(name: str) -> bool:
    """In composed form (Unicode NFC), and starting with a character of its own: ids are made
    from names, and "Café" written two ways would name two tables that look the same."""
    return unicodedata.normalize("NFC", name) == name and not unicodedata.combining(name[0])


def check_name(what: str, name: str, field: str | None = None) -> None:
    """A name is 1 to NAME_MAX_CHARS printable characters without surrounding spaces."""
    if not is_name(name):
        raise NameRefused(f"A {what} is 1 to {NAME_MAX_CHARS} printable characters without "
                          "surrounding spaces.", field=field)


def check_new_name(what: str, name: str, field: str) -> None:
    """A name given to something new is written one way only. (Checked where names are
    given, not where they are used: a name recorded before stays usable.)"""
    if not written_one_way(name):
        raise NameRefused(f"A {what} is written in composed form (Unicode NFC) and does not "
                          "start with an accent.", field=field)
