"""Rule sets and table limits (R-S1, R-S2, R-X15): immutable, validated, hashable.

A :class:`RuleSet` is what a preset fixes (how the game is played); the
:class:`TableLimits` are settings of the table (R-X15). A round records both in
full, with the rule set's content hash, so the rules of a past round never
change when a table's rules do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from ledger.errors import RuleSetInvalid

AMOUNT_MAX = 10**12  # the most minor units one request moves (R-M1); a balance may hold more
BOXES_MAX = 12  # boxes at one table

Ratio = tuple[int, int]
DealerPolicy = Literal["stand_17", "beat_players"]
DealerNaturalTakes = Literal["all", "original_only"]

DEALER_POLICIES: tuple[str, ...] = ("stand_17", "beat_players")
DEALER_NATURAL_TAKES: tuple[str, ...] = ("all", "original_only")
RATIO_FIELDS = ("natural_pays", "insurance_pays", "prize_777_mixed", "prize_777_suited",
                "prize_678_suited")
BOOL_FIELDS = ("dealer_hole_card", "dealer_hits_soft_17", "naturals", "surrender", "double",
               "split", "insurance", "even_money", "prizes")


@dataclass(frozen=True, slots=True)
class RuleSet:
    """How a game is played; every row of RULES.md's preset table is a field."""

    name: str
    version: int
    decks: int = 6
    wild_cards: int = 0
    penetration_percent: int = 75
    dealer_hole_card: bool = False  # R-G2: True deals the dealer a face-down and a face-up card
    dealer_policy: DealerPolicy = "stand_17"  # R-G8 / R-W6
    dealer_hits_soft_17: bool = False
    naturals: bool = True  # R-G6
    natural_pays: Ratio = (3, 2)
    dealer_natural_takes: DealerNaturalTakes = "all"  # R-G7 / R-X12
    surrender: bool = True  # R-C1
    double: bool = True  # R-C2
    split: bool = True  # R-C3
    max_hands_per_box: int = 3
    insurance: bool = True  # R-C5
    insurance_pays: Ratio = (2, 1)
    even_money: bool = True  # R-C6
    prizes: bool = True  # R-C7
    prize_777_mixed: Ratio = (3, 1)
    prize_777_suited: Ratio = (5, 1)
    prize_678_suited: Ratio = (5, 1)
    bettors_per_box: int = 3  # R-C8
    min_boxes_lone_player: int = 2

    def __post_init__(self) -> None:
        _check_rules(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready content; ratios as two-element lists. A setting of
        ``ADDED_SETTINGS`` at the value it was added with is left out: rules that do not use
        it are recorded, and hashed, as they were before it existed."""
        content = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        for name, value in ADDED_SETTINGS.items():
            if content[name] == value:
                del content[name]
        return content

    @property
    def content_hash(self) -> str:
        return rules_hash(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleSet:
        """Build from stored or requested content, refusing unknown fields (R-S1)."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise RuleSetInvalid(key, "there is no such setting")
        for key in ("name", "version"):
            if key not in data:
                raise RuleSetInvalid(key, "it is required")
        values: dict[str, Any] = {k: tuple(v) if k in RATIO_FIELDS and isinstance(v, list) else v
                  for k, v in data.items()}
        return cls(**values)

    def evolve(self, **changes: Any) -> RuleSet:
        """A copy with some settings changed (validated again)."""
        return replace(self, **changes)


_LIMITS = "R-X15"  # what a refused table limit cites: limits are the table's own settings


@dataclass(frozen=True, slots=True)
class TableLimits:
    """Settings of a table, not of the preset (R-X15), in minor units."""

    table_min: int = 10
    table_max: int = 1000
    min_chip: int = 5
    min_unit: int = 1
    boxes: int = 7

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise RuleSetInvalid(f.name, "it must be a whole number of at least 1", _LIMITS)
        if self.table_max < self.table_min:
            raise RuleSetInvalid("table_max", f"the table maximum {self.table_max} is below the "
                                 f"table minimum {self.table_min}", _LIMITS)
        for name in ("table_min", "table_max", "min_chip"):
            if getattr(self, name) % self.min_unit:
                raise RuleSetInvalid(name, f"it must be a multiple of the minimum unit "
                                     f"{self.min_unit}", _LIMITS)
        if self.boxes > BOXES_MAX:
            raise RuleSetInvalid("boxes", f"a table has at most {BOXES_MAX} boxes", _LIMITS)
        if self.table_max > AMOUNT_MAX:
            raise RuleSetInvalid("table_max", f"it exceeds the largest supported amount "
                                 f"({AMOUNT_MAX})", _LIMITS)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableLimits:
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise RuleSetInvalid(key, "there is no such table setting", _LIMITS)
        return cls(**data)


# The settings added since the first version, each with the value that plays as the rules did
# before it existed (as to_dict writes it: a ratio as a list): left out of a rule set's content
# at that value (RuleSet.to_dict), so that a rule set recorded before keeps its content and
# hash, and with them its name and version (R-S1). A new setting goes here (README: Adding a
# rule setting).
ADDED_SETTINGS: Final[Mapping[str, Any]] = MappingProxyType({})


def rules_hash(content: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a rule set's content as JSON: sorted keys, no spaces, non-ASCII
    escaped. Taken over the content as recorded, a check of a round's rules does not depend on
    the settings this version of the ledger knows."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()


# The whole-number settings of a rule set and their ranges (R-S1), as the API document gives
# them too.
SETTING_RANGES: dict[str, tuple[int, int]] = {
    "version": (1, 1_000_000), "decks": (1, 8), "wild_cards": (0, 4),
    "penetration_percent": (50, 90), "max_hands_per_box": (1, 4), "bettors_per_box": (1, 3),
    "min_boxes_lone_player": (1, 3)}


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise RuleSetInvalid(name, f"it must be a whole number from {low} to {high}")


def _check_rules(rules: RuleSet) -> None:
    if not isinstance(rules.name, str) or not rules.name.strip() or len(rules.name) > 64:
        raise RuleSetInvalid("name", "it must be a non-empty text of at most 64 characters")
    for name, (low, high) in SETTING_RANGES.items():
        _check_int(name, getattr(rules, name), low, high)
    for name in BOOL_FIELDS:
        if type(getattr(rules, name)) is not bool:
            raise RuleSetInvalid(name, "it must be true or false")
    for name in RATIO_FIELDS:
        ratio = getattr(rules, name)
        if (not isinstance(ratio, tuple) or len(ratio) != 2
                or not all(type(x) is int and 1 <= x <= 100 for x in ratio)):
            raise RuleSetInvalid(name, "it must be a ratio of two whole numbers from 1 to 100")
    if rules.dealer_policy not in DEALER_POLICIES:
        raise RuleSetInvalid("dealer_policy", f"it must be one of {', '.join(DEALER_POLICIES)}")
    if rules.dealer_natural_takes not in DEALER_NATURAL_TAKES:
        raise RuleSetInvalid("dealer_natural_takes",
                             f"it must be one of {', '.join(DEALER_NATURAL_TAKES)}")
    if rules.dealer_hole_card and (rules.naturals or rules.insurance or rules.surrender):
        raise RuleSetInvalid("dealer_hole_card", "naturals, insurance and surrender are defined "
                             "only for the no-hole-card deal")
    if rules.dealer_policy == "beat_players" and rules.dealer_hits_soft_17:
        raise RuleSetInvalid("dealer_hits_soft_17", "it applies only to the stand_17 policy")
    if rules.even_money and not rules.naturals:
        raise RuleSetInvalid("even_money", "even money needs naturals")
    if rules.insurance and not rules.naturals:
        raise RuleSetInvalid("insurance", "insurance pays only on a dealer natural, so it "
                             "needs naturals")


CASINO = RuleSet(name="casino", version=1)
WILD21 = RuleSet(
    name="wild21", version=1, wild_cards=1, dealer_hole_card=True, dealer_policy="beat_players",
    naturals=False, surrender=False, double=False, split=False, insurance=False,
    even_money=False, prizes=False, bettors_per_box=1, min_boxes_lone_player=1,
)
CASINO_WILD = RuleSet(name="casino_wild", version=1, wild_cards=1)

PRESETS: dict[str, RuleSet] = {r.name: r for r in (CASINO, WILD21, CASINO_WILD)}


def preset_clash(rules: RuleSet) -> str | None:
    """Why these rules may not be recorded under their name and version, if a preset has
    both with other content: a round records its rules by name, version and content hash
    (R-S1), and the first two must tell a preset from its variants."""
    named = PRESETS.get(rules.name)
    if named is None or named.version != rules.version or named == rules:
        return None
    return (f"the rules differ from {named.name} v{named.version}: give them a name or "
            "version of their own")


def preset(name: str) -> RuleSet:
    try:
        return PRESETS[name]
    except KeyError:
        raise RuleSetInvalid("preset", f"'{name}' is not one of {', '.join(PRESETS)}") from None


def undealable(rules: RuleSet, limits: TableLimits) -> str | None:
    """The table limit (``boxes`` or ``table_max``) under which no round can be dealt, if one
    is: R-C8 deals to a player alone only on ``min_boxes_lone_player`` boxes, so a table of
    fewer is dealt only when a second player can stake, on a box of his own or one he shares
    (bettors may share a box, and its maximum holds two minimum stakes)."""
    if limits.boxes >= rules.min_boxes_lone_player or limits.boxes > 1:
        return None
    if rules.bettors_per_box == 1:
        return "boxes"
    return "table_max" if limits.table_max < 2 * limits.table_min else None
