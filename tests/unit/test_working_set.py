"""Giving back a command's aggregates at once leaves what giving each in turn leaves."""

from __future__ import annotations

import itertools
import random
from uuid import UUID

from eventsourcing.domain import Aggregate

from ledger.working_set import WorkingSet


class Thing(Aggregate):
    def __init__(self) -> None:
        pass


def copy_at(thing: Thing, version: int) -> Thing:
    twin = Thing._create(Thing.Created, id=thing.id)
    twin.version = version
    return twin


def test_a_batch_given_back_leaves_what_giving_each_in_turn_leaves() -> None:
    rng = random.Random(7)
    things = [Thing._create(Thing.Created, id=UUID(int=n)) for n in range(6)]
    for size, _ in itertools.product((1, 3, 5, 20), range(200)):
        pool = [*things, *(copy_at(rng.choice(things), rng.randint(0, 3)) for _ in range(3))]
        held = rng.sample(pool, rng.randint(0, 4))
        batch = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
        one_by_one, at_once = WorkingSet(size), WorkingSet(size)
        for aggregate in held:
            one_by_one.give(aggregate)
            at_once.give(aggregate)
        for aggregate in batch:
            one_by_one.give(aggregate)
        at_once.give_all(batch)
        assert list(at_once._items.items()) == list(one_by_one._items.items())
