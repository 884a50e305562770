"""How the names the ledger records are written: a player's, a table's, an actor's. RULES.md
has no rule on names, so a refusal cites none; it names the field at fault."""

from __future__ import annotations

import re
import unicodedata
from typing import Final, TypeGuard

from ledger.errors import NameRefused

NAME_MAX_CHARS = 64

# Player ids travel in URL paths (an account is `/accounts/{player}`), so a new one is kept to
# characters that need no escaping there. None of them can be `_type_` or `_data_` either:
# the stored events hold objects keyed by player id, and an object of exactly those two keys
# reads back as an encoded value of the event store's, not as the object written.
PLAYER_ID_PATTERN: Final = rf"[A-Za-z0-9][A-Za-z0-9._@+-]{{0,{NAME_MAX_CHARS - 1}}}"
PLAYER_ID_WRITTEN: Final = (f"a letter or digit, then up to {NAME_MAX_CHARS - 1} of "
                            "A-Z a-z 0-9 . _ @ + -")


def is_name(name: object) -> TypeGuard[str]:
    """1 to NAME_MAX_CHARS printable characters without surrounding spaces."""
    return isinstance(name, str) and 1 <= len(name) <= NAME_MAX_CHARS \
        and name.isprintable() and name == name.strip()


# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): characters that
# show nothing. Most are not printable (str.isprintable); a few letters and marks are, such as
# U+3164 HANGUL FILLER and the variation selectors, and "T1" with one looks like "T1". And
# U+2800 BRAILLE PATTERN BLANK, a printable symbol that is not default-ignorable but shows
# nothing all the same.
_INVISIBLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
              (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
              (0x2060, 0x206F), (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F),
              (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))

# Characters Unicode keeps only to stand for another (compatibility characters, which NFKC
# maps), and which look like what they stand for: in another width, font or shape by their
# decomposition's tag (UnicodeData.txt): "Table 7" with a full-width 7, a mathematical bold,
# circled or squared letter, small and vertical forms, an Arabic letter's contextual form; and
# the ligatures and numerals written as one character: Latin and Armenian presentation
# ligatures ("ﬁ"), "Ĳ", "ǅ", "Ǉ", "Ǌ", "Ǳ", Roman numerals ("Ⅱ"), and numbers in parentheses or
# with a full stop ("⑴", "⒈"). Not the other compatibility characters, which are how words are
# written: "№", "Nº", "™", Armenian "և", Thai SARA AM, the Hangul letters typed alone.
_LOOKALIKE_TAGS = frozenset({"<wide>", "<narrow>", "<font>", "<circle>", "<square>", "<small>",
                             "<vertical>", "<initial>", "<medial>", "<final>", "<isolated>"})
_LOOKALIKE_RANGES = ((0xFB00, 0xFB06), (0xFB13, 0xFB17), (0x0132, 0x0133), (0x01C4, 0x01CC),
                     (0x01F1, 0x01F3), (0x2160, 0x2188), (0x2474, 0x249B))


# How a new name is written, as every description of one says it (a refusal says what is
# wrong with the name in hand: ``unwritten``).
WRITTEN_ONE_WAY: Final = ("in composed form (Unicode NFC), not starting with an accent, with "
                          "no character that shows nothing and none that stands for another "
                          "and looks like it (a full-width letter or digit, a ligature such "
                          "as ﬁ, a Roman numeral)")


def invisible_in(name: str) -> str | None:
    """The first character of ``name`` that shows nothing, if any."""
    return next((c for c in name if any(lo <= ord(c) <= hi for lo, hi in _INVISIBLE)), None)


def _lookalike(c: str) -> bool:
    return (unicodedata.decomposition(c).split(" ", 1)[0] in _LOOKALIKE_TAGS
            or any(lo <= ord(c) <= hi for lo, hi in _LOOKALIKE_RANGES))


def lookalike_in(name: str) -> str | None:
    """The first character of ``name`` that stands for another and looks like it, if any."""
    return next((c for c in name if _lookalike(c)), None)


def unwritten(what: str, name: str, *, lookalikes: bool = True) -> str | None:
    """Why ``name``, given to a new ``what``, is not written one way only (``WRITTEN_ONE_WAY``),
    as a sentence without its full stop; None if it is. Ids are made from names, and "Café"
    written two ways, or "Table 7" with a full-width 7, would name two tables that look the
    same. ``lookalikes`` False: not the look-alike characters, which earlier versions took."""
    hidden = invisible_in(name)
    if hidden is not None:
        return (f"a {what} holds no character that shows nothing, as U+{ord(hidden):04X} "
                f"({unicodedata.name(hidden, 'unnamed')}) does: the name would look the same "
                "without it")
    alias = lookalike_in(name) if lookalikes else None
    if alias is not None:  # the name to write: each such character as what it stands for
        plain = unicodedata.normalize("NFC", "".join(
            unicodedata.normalize("NFKC", c) if _lookalike(c) else c for c in name))
        return (f"a {what} holds no character standing for another that looks like it, as "
                f"U+{ord(alias):04X} ({unicodedata.name(alias, 'unnamed')}) does: write "
                f"'{plain}'")
    if unicodedata.normalize("NFC", name) != name or (name and unicodedata.combining(name[0])):
        return f"a {what} is written in composed form (Unicode NFC) and does not start with an " \
               "accent"
    return None


def check_name(what: str, name: str, field: str | None = None) -> None:
    """A name is 1 to NAME_MAX_CHARS printable characters without surrounding spaces."""
    if not is_name(name):
        raise NameRefused(f"A {what} is 1 to {NAME_MAX_CHARS} printable characters without "
                          "surrounding spaces.", field=field)


def check_new_name(what: str, name: str, field: str) -> None:
    """A name given to something new is written one way only. (Checked where names are
    given, not where they are used: a name recorded before stays usable.)"""
    why = unwritten(what, name)
    if why is not None:
        raise NameRefused(f"{why[0].upper()}{why[1:]}.", field=field)


def check_new_player_id(player: str, field: str = "player") -> None:
    """A new player id is of the form every read of an account takes (``PLAYER_ID_PATTERN``)."""
    if re.fullmatch(PLAYER_ID_PATTERN, player) is None:
        raise NameRefused(f"A player id is {PLAYER_ID_WRITTEN}.", field=field)
