"""Rule sets and table limits (R-S1, R-S2, R-X15): the presets, validation, content and hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from ledger.errors import LedgerError, RuleSetInvalid
from ledger.rules import (
    BOOL_FIELDS,
    CASINO,
    CASINO_WILD,
    PRESETS,
    RATIO_FIELDS,
    WILD21,
    RuleSet,
    TableLimits,
    preset,
    rules_hash,
)

# -- the presets (R-S2) --------------------------------------------------------------------
# One row of RULES.md's preset table per group of fields; (casino, wild21, casino_wild).

TABLE: dict[str, tuple[Any, Any, Any]] = {
    # decks / wild cards per shoe
    "decks": (6, 6, 6),
    "wild_cards": (0, 1, 1),
    # dealer's initial cards: no hole card, or first face down and second face up
    "dealer_hole_card": (False, True, False),
    # dealer draws: to 16, stands on all 17s; or while below every live player's total
    "dealer_policy": ("stand_17", "beat_players", "stand_17"),
    "dealer_hits_soft_17": (False, False, False),
    # blackjack pays 3:2 and beats any other 21; wild21 has no naturals
    "naturals": (True, False, True),
    "natural_pays": ((3, 2), (3, 2), (3, 2)),
    # dealer blackjack takes all stakes on the box (European rule)
    "dealer_natural_takes": ("all", "all", "all"),
    # surrender, double, split, insurance, even money, prizes
    "surrender": (True, False, True),
    "double": (True, False, True),
    "split": (True, False, True),
    "insurance": (True, False, True),
    "even_money": (True, False, True),
    "prizes": (True, False, True),
    # bettors per box / min boxes for a lone player
    "bettors_per_box": (3, 1, 3),
    "min_boxes_lone_player": (2, 1, 2),
    # shoe penetration
    "penetration_percent": (75, 75, 75),
    # R-C3: at most 3 hands per box; R-C5: insurance pays 2:1; R-C7: prize rates
    "max_hands_per_box": (3, 3, 3),
    "insurance_pays": ((2, 1), (2, 1), (2, 1)),
    "prize_777_mixed": ((3, 1), (3, 1), (3, 1)),
    "prize_777_suited": ((5, 1), (5, 1), (5, 1)),
    "prize_678_suited": ((5, 1), (5, 1), (5, 1)),
}


def test_the_preset_table_covers_every_setting_of_a_rule_set() -> None:
    names = {f.name for f in dataclasses.fields(RuleSet)}
    assert names - {"name", "version"} == set(TABLE)


@pytest.mark.parametrize("setting", sorted(TABLE))
def test_each_preset_matches_its_row_of_the_rules_table(setting: str) -> None:
    casino, wild21, casino_wild = TABLE[setting]
    assert getattr(CASINO, setting) == casino
    assert getattr(WILD21, setting) == wild21
    assert getattr(CASINO_WILD, setting) == casino_wild


def test_the_presets_are_named_version_1_and_listed_by_name() -> None:
    assert [(r.name, r.version) for r in (CASINO, WILD21, CASINO_WILD)] == [
        ("casino", 1), ("wild21", 1), ("casino_wild", 1)]
    assert PRESETS == {"casino": CASINO, "wild21": WILD21, "casino_wild": CASINO_WILD}


def test_casino_wild_is_casino_plus_one_wild_card() -> None:
    assert CASINO_WILD.evolve(name="casino", wild_cards=0) == CASINO


@pytest.mark.parametrize("name", ["casino", "wild21", "casino_wild"])
def test_a_preset_is_found_by_its_name(name: str) -> None:
    assert preset(name) is PRESETS[name]


def test_an_unknown_preset_is_refused_naming_the_preset_field() -> None:
    with pytest.raises(RuleSetInvalid, match="'poker' is not one of") as e:
        preset("poker")
    assert e.value.field == "preset"
    assert e.value.rule == "R-S1"


@pytest.mark.parametrize(("limits", "field"), [
    ({"table_min": 100, "table_max": 50}, "table_max"), ({"boxes": 13}, "boxes"),
    ({"min_chip": 0}, "min_chip"), ({"min_unit": 2, "min_chip": 5}, "min_chip"),
    ({"jokers": 2}, "jokers")])
def test_a_refused_table_limit_cites_r_x15_not_the_rule_sets_rule(
        limits: dict[str, Any], field: str) -> None:
    with pytest.raises(RuleSetInvalid) as e:
        TableLimits.from_dict(limits)
    assert (e.value.field, e.value.rule) == (field, "R-X15")


def test_a_maximum_below_the_minimum_is_refused_with_both_figures() -> None:
    # A manager who raised only the minimum is told both, not only that the maximum is wrong.
    with pytest.raises(RuleSetInvalid, match="the table maximum 1000 is below the table "
                                             "minimum 2000"):
        TableLimits(table_min=2000)


def test_table_limit_defaults_are_those_of_r_x15() -> None:
    limits = TableLimits()
    assert (limits.table_min, limits.table_max, limits.min_chip, limits.min_unit) == (
        10, 1000, 5, 1)
    assert limits.boxes == 7


def test_a_rule_set_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CASINO.decks = 8  # type: ignore[misc]


# -- validation: every branch refuses with the field it names ------------------------------

INVALID_RULES: list[tuple[str, dict[str, Any]]] = [
    ("name", {"name": ""}),
    ("name", {"name": "   "}),
    ("name", {"name": "x" * 65}),
    ("name", {"name": 7}),
    ("version", {"version": 0}),
    ("version", {"version": 1_000_001}),
    ("version", {"version": "1"}),
    ("version", {"version": True}),
    ("version", {"version": 1.0}),
    ("decks", {"decks": 0}),
    ("decks", {"decks": 9}),
    ("wild_cards", {"wild_cards": -1}),
    ("wild_cards", {"wild_cards": 5}),
    ("penetration_percent", {"penetration_percent": 49}),
    ("penetration_percent", {"penetration_percent": 91}),
    ("max_hands_per_box", {"max_hands_per_box": 0}),
    ("max_hands_per_box", {"max_hands_per_box": 5}),
    ("bettors_per_box", {"bettors_per_box": 0}),
    ("bettors_per_box", {"bettors_per_box": 4}),
    ("min_boxes_lone_player", {"min_boxes_lone_player": 0}),
    ("min_boxes_lone_player", {"min_boxes_lone_player": 4}),
    *[(name, {name: 1}) for name in BOOL_FIELDS],
    *[(name, {name: "yes"}) for name in BOOL_FIELDS],
    *[(name, {name: [3, 2]}) for name in RATIO_FIELDS],
    *[(name, {name: (3,)}) for name in RATIO_FIELDS],
    *[(name, {name: (3, 2, 1)}) for name in RATIO_FIELDS],
    *[(name, {name: (0, 2)}) for name in RATIO_FIELDS],
    *[(name, {name: (3, 0)}) for name in RATIO_FIELDS],
    *[(name, {name: (101, 1)}) for name in RATIO_FIELDS],
    *[(name, {name: (1.5, 1)}) for name in RATIO_FIELDS],
    *[(name, {name: (True, 1)}) for name in RATIO_FIELDS],
    ("dealer_policy", {"dealer_policy": "hit_17"}),
    ("dealer_natural_takes", {"dealer_natural_takes": "none"}),
    ("dealer_hole_card", {"dealer_hole_card": True}),
    ("dealer_hole_card", {"dealer_hole_card": True, "naturals": False, "even_money": False,
                          "surrender": False}),
    ("dealer_hole_card", {"dealer_hole_card": True, "naturals": False, "even_money": False,
                          "insurance": False}),
    ("dealer_hole_card", {"dealer_hole_card": True, "surrender": False,
                          "insurance": False}),
    ("dealer_hits_soft_17", {"dealer_policy": "beat_players", "dealer_hits_soft_17": True}),
    ("even_money", {"naturals": False}),
]


@pytest.mark.parametrize(("field", "changes"), INVALID_RULES,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_RULES)])
def test_an_invalid_setting_is_refused_naming_its_field(field: str, changes: dict[str, Any]
                                                        ) -> None:
    with pytest.raises(RuleSetInvalid) as e:
        CASINO.evolve(**changes)
    assert e.value.field == field
    assert e.value.rule == "R-S1"
    assert isinstance(e.value, LedgerError)
    assert e.value.message.startswith(f"Setting '{field}' is invalid: ")
    assert e.value.message.endswith(".")


def test_a_rule_set_built_directly_is_validated_too() -> None:
    with pytest.raises(RuleSetInvalid) as e:
        RuleSet(name="casino", version=1, decks=0)
    assert e.value.field == "decks"


@pytest.mark.parametrize(("field", "value"), [
    ("decks", 1), ("decks", 8), ("wild_cards", 4), ("penetration_percent", 50),
    ("penetration_percent", 90), ("max_hands_per_box", 1), ("max_hands_per_box", 4),
    ("bettors_per_box", 1), ("min_boxes_lone_player", 3), ("version", 1_000_000),
    ("name", "x" * 64), ("natural_pays", (6, 5)), ("dealer_natural_takes", "original_only"),
    ("dealer_hits_soft_17", True),
])
def test_the_bounds_of_each_range_are_accepted(field: str, value: Any) -> None:
    assert getattr(CASINO.evolve(**{field: value}), field) == value


def test_insurance_without_naturals_is_refused() -> None:
    with pytest.raises(RuleSetInvalid) as e:
        CASINO.evolve(naturals=False, even_money=False)
    assert e.value.field == "insurance"


INVALID_LIMITS: list[tuple[str, dict[str, Any]]] = [
    *[(name, {name: 0}) for name in ("table_min", "table_max", "min_chip", "min_unit", "boxes")],
    *[(name, {name: -5}) for name in ("table_min", "min_chip", "min_unit", "boxes")],
    *[(name, {name: 10.0}) for name in ("table_min", "table_max", "min_chip", "min_unit",
                                        "boxes")],
    *[(name, {name: True}) for name in ("table_min", "min_chip", "min_unit", "boxes")],
    ("table_min", {"table_min": "10"}),
    ("table_max", {"table_min": 100, "table_max": 99}),
    ("boxes", {"boxes": 13}),
    ("table_max", {"table_max": 10**12 + 1}),
    ("min_chip", {"min_unit": 5, "min_chip": 6, "table_min": 10, "table_max": 1000}),
    ("table_min", {"min_unit": 5, "min_chip": 5, "table_min": 12, "table_max": 1000}),
    ("table_max", {"min_unit": 5, "min_chip": 5, "table_min": 10, "table_max": 1001}),
]


@pytest.mark.parametrize(("field", "changes"), INVALID_LIMITS,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID_LIMITS)])
def test_an_invalid_table_limit_is_refused_naming_its_field(field: str,
                                                            changes: dict[str, Any]) -> None:
    with pytest.raises(RuleSetInvalid) as e:
        TableLimits(**changes)
    assert e.value.field == field
    assert e.value.message.startswith(f"Setting '{field}' is invalid: ")


def test_table_limits_at_their_bounds_are_accepted() -> None:
    limits = TableLimits(table_min=10, table_max=10, min_chip=1, min_unit=1, boxes=12)
    assert limits.table_max == limits.table_min
    assert TableLimits(table_max=10**12).table_max == 10**12


# -- content: round trip, unknown fields, hash --------------------------------------------

@pytest.mark.parametrize("rules", [CASINO, WILD21, CASINO_WILD], ids=lambda r: r.name)
def test_a_rule_set_survives_to_dict_and_from_dict(rules: RuleSet) -> None:
    assert RuleSet.from_dict(rules.to_dict()) == rules


@pytest.mark.parametrize("rules", [CASINO, WILD21, CASINO_WILD], ids=lambda r: r.name)
def test_a_rule_set_survives_a_json_round_trip_with_its_hash(rules: RuleSet) -> None:
    back = RuleSet.from_dict(json.loads(json.dumps(rules.to_dict())))
    assert back == rules
    assert back.content_hash == rules.content_hash


def test_to_dict_gives_ratios_as_two_element_lists() -> None:
    content = CASINO.to_dict()
    assert content["natural_pays"] == [3, 2]
    assert all(isinstance(content[name], list) for name in RATIO_FIELDS)
    assert content["name"] == "casino"


def test_from_dict_fills_unnamed_settings_with_defaults() -> None:
    assert RuleSet.from_dict({"name": "casino", "version": 1}) == CASINO


def test_an_unknown_setting_is_refused_by_name() -> None:
    with pytest.raises(RuleSetInvalid, match="no such setting") as e:
        RuleSet.from_dict({**CASINO.to_dict(), "dealer_peeks": True})
    assert e.value.field == "dealer_peeks"


@pytest.mark.parametrize("missing", ["name", "version"])
def test_name_and_version_are_required(missing: str) -> None:
    content = CASINO.to_dict()
    del content[missing]
    with pytest.raises(RuleSetInvalid, match="required") as e:
        RuleSet.from_dict(content)
    assert e.value.field == missing


def test_from_dict_validates_the_content() -> None:
    with pytest.raises(RuleSetInvalid) as e:
        RuleSet.from_dict({**CASINO.to_dict(), "natural_pays": [3, 0]})
    assert e.value.field == "natural_pays"


def test_table_limits_round_trip_and_refuse_unknown_settings() -> None:
    limits = TableLimits(table_min=25, table_max=5000, min_chip=25, min_unit=5, boxes=5)
    assert TableLimits.from_dict(limits.to_dict()) == limits
    with pytest.raises(RuleSetInvalid, match="no such table setting") as e:
        TableLimits.from_dict({"table_min": 10, "house_edge": 2})
    assert e.value.field == "house_edge"


def test_the_content_hash_is_stable_across_constructions() -> None:
    assert RuleSet(name="casino", version=1).content_hash == CASINO.content_hash
    assert RuleSet.from_dict(CASINO.to_dict()).content_hash == CASINO.content_hash


def test_a_setting_added_later_keeps_the_hash_of_rules_recorded_before_it(monkeypatch) -> None:
    # A new setting with a default changed every rule set's hash: a database's casino v1
    # stood for other rules, and no table under it could open or change its limits (R-S1).
    recorded_before = CASINO.to_dict()
    del recorded_before["min_boxes_lone_player"]  # as if it were the setting added
    before = rules_hash(recorded_before)
    monkeypatch.setattr("ledger.rules.ADDED_SETTINGS", {"min_boxes_lone_player": 2})
    assert CASINO.to_dict() == recorded_before  # recorded as it was, and hashed so
    assert CASINO.content_hash == rules_hash(CASINO.to_dict()) == before
    assert RuleSet.from_dict(recorded_before).content_hash == before
    assert CASINO.evolve(min_boxes_lone_player=1).content_hash != before


def test_the_content_hash_is_sha256_of_the_rules_as_sorted_compact_json() -> None:
    # As the README gives it to auditors, and as the first version recorded it.
    raw = json.dumps(CASINO.to_dict(), sort_keys=True, separators=(",", ":")).encode()
    assert CASINO.content_hash == hashlib.sha256(raw).hexdigest() == rules_hash(
        json.loads(raw))
    assert CASINO.content_hash == ("975f2814214136f1d1ea692ebe214139"
                                   "db55ced51ac882320f44a4459d30ef5f")


def test_the_presets_have_three_different_hashes() -> None:
    assert len({CASINO.content_hash, WILD21.content_hash, CASINO_WILD.content_hash}) == 3


# For each setting, a base rule set and a valid change of that one setting.
ONE_CHANGE: dict[str, tuple[RuleSet, Any]] = {
    "name": (CASINO, "casino_eu"),
    "version": (CASINO, 2),
    "decks": (CASINO, 8),
    "wild_cards": (CASINO, 2),
    "penetration_percent": (CASINO, 80),
    "dealer_hole_card": (WILD21, False),
    "dealer_policy": (CASINO, "beat_players"),
    "dealer_hits_soft_17": (CASINO, True),
    "naturals": (CASINO.evolve(even_money=False, insurance=False), False),
    "natural_pays": (CASINO, (6, 5)),
    "dealer_natural_takes": (CASINO, "original_only"),
    "surrender": (CASINO, False),
    "double": (CASINO, False),
    "split": (CASINO, False),
    "max_hands_per_box": (CASINO, 4),
    "insurance": (CASINO, False),
    "insurance_pays": (CASINO, (3, 1)),
    "even_money": (CASINO, False),
    "prizes": (CASINO, False),
    "prize_777_mixed": (CASINO, (2, 1)),
    "prize_777_suited": (CASINO, (4, 1)),
    "prize_678_suited": (CASINO, (4, 1)),
    "bettors_per_box": (CASINO, 2),
    "min_boxes_lone_player": (CASINO, 1),
}


def test_every_setting_has_a_change_to_hash() -> None:
    assert set(ONE_CHANGE) == {f.name for f in dataclasses.fields(RuleSet)}


@pytest.mark.parametrize("setting", sorted(ONE_CHANGE))
def test_changing_any_one_setting_changes_the_content_hash(setting: str) -> None:
    base, value = ONE_CHANGE[setting]
    changed = base.evolve(**{setting: value})
    assert getattr(changed, setting) != getattr(base, setting)
    assert changed.content_hash != base.content_hash
    assert base.evolve(**{setting: getattr(base, setting)}).content_hash == base.content_hash
