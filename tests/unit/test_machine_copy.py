"""A copied round (the event store cache hands out copies) shares no mutable state."""

from __future__ import annotations

import copy

from ledger.engine.machine import RoundMachine
from ledger.rules import CASINO
from tests.scripted import Scripted


def test_every_mutable_attribute_of_the_machine_is_copied() -> None:
    r = Scripted(CASINO, "8S 9H TD 8H 9C 8D 7C").bet("P1", 1).bet("P2", 2).deal()
    mutable = {name for name, value in vars(r.m).items()
               if isinstance(value, list | dict | set) or callable(value)}
    assert mutable <= set(RoundMachine._COPIED)


def test_playing_on_a_copy_leaves_the_original_as_it_was() -> None:
    r = Scripted(CASINO, "8S 9H TD 8H 9C 8D 7C 5S").bet("P1", 1).bet("P2", 2).deal()
    before = r.m.view()
    twin = copy.deepcopy(r.m)
    twin.split("P1", 1, 0, r.shoe.draw)
    assert twin.view() != before
    assert r.m.view() == before
    assert twin.rules is r.m.rules  # immutable parts are shared
