"""Write the stored-event corpus of this event format version (run once per format).

    .venv/bin/python -m tests.corpus.make_corpus tests/corpus/ledger_events_v1.json

It plays a fixed session on an in-memory ledger: one table and shoe per round
(casino or casino_wild), worked-case rounds with splits, doubles, insurance, even money, a
surrender, a wild-card forfeit, a void and a ruling; then closes the tables so the
shoes are revealed. The file holds every stored event exactly as the recorder
keeps it, and what each round settled, so later versions can prove they still
read and replay the first version's history.
"""

from __future__ import annotations

import base64
import json
import sys
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from ledger.application import GameLedger
from ledger.rules import CASINO, CASINO_WILD
from tests.scripted import SteeredShuffle

KEY = bytes(range(32))  # a test key, only ever used for this corpus
START = datetime(2026, 1, 1, 20, 0, tzinfo=UTC)

SESSION: list[tuple[str, str, list[tuple[Any, ...]]]] = [  # (kind, shoe prefix, steps)
    ("casino", "8S 9H TD 8H 9C 8D 7C 5S 4D 3C 9S", [
        ("split", "P1", 1, 0), ("stand", "P1", 1, 0), ("stand", "P1", 1, 1),
        ("stand", "P2", 2, 0)]),
    ("casino", "AS TH AD KS 7C 9D", [("even_money", "P1", 1), ("insure", "P2", 5),
                                      ("stand", "P2", 2, 0)]),
    ("casino", "6S TH TD 5S 8C 9H AD", [("double", "P1", 1, 0), ("stand", "P2", 2, 0)]),
    ("casino", "TS TH TD 6S 8C 9D", [("surrender", "P1", 1), ("stand", "P2", 2, 0)]),
    ("wild", "TS 9H 7D 7S 5H W 8C", [("stand", "P1", 1, 0), ("hit", "P2", 2, 0)]),
    ("wild", "TS 9H 7D 7S 5H", [("void", "dealer misdeal")]),
]


def record_session() -> dict[str, Any]:
    """Play the session on a fresh in-memory ledger: the corpus, as this version writes it."""
    clock = (START + timedelta(seconds=s) for s in count())
    prefixes = [prefix for _, prefix, _ in SESSION]
    ledger = GameLedger(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}, shoe_key=KEY,
                        clock=lambda: next(clock), randbelow=SteeredShuffle(*prefixes))
    ids = (f"corpus-{n}" for n in count(1))
    presets = {"casino": CASINO, "wild": CASINO_WILD}
    for player in ("P1", "P2"):
        ledger.open_account(next(ids), "cashier", player)
        ledger.buy_in(next(ids), "cashier", player, 10_000)
    rounds, tables = [], []
    for n, (kind, _, steps) in enumerate(SESSION, start=1):
        table = ledger.open_table(next(ids), "boss", f"Corpus {n}", presets[kind])
        tables.append(table)
        r = ledger.start_round(next(ids), "dealer", table)
        rounds.append(r)
        ledger.place_stake(next(ids), "dealer", r, "P1", 1, 10)
        ledger.place_stake(next(ids), "dealer", r, "P2", 2, 10)
        if steps[0][0] != "void":
            ledger.deal(next(ids), "dealer", r)
        for use_case, *args in steps:
            getattr(ledger, use_case)(next(ids), "dealer", r, *args)
        if ledger.round_state(r)["phase"] == "playing":
            ledger.play_dealer(next(ids), "dealer", r)
            ledger.settle(next(ids), "dealer", r)
        if n == 1:
            ledger.record_ruling(next(ids), "manager", r, "dealer paid box 2 short", [12],
                                 {"P2": 5})
    for table_id in tables:
        ledger.close_table(next(ids), "manager", table_id, "end of corpus")
    events = ledger.recorder.select_notifications(start=None, limit=100_000)
    out: dict[str, Any] = {
        "format": 1,
        "shoe_key_hex": KEY.hex(),
        "rounds": {str(r): ledger.round_state(r)["results"] for r in rounds},
        "balances": {p: ledger.balance(p)["total"] for p in ("P1", "P2")},
        "events": [{"originator_id": str(e.originator_id), "originator_version":
                    e.originator_version, "topic": e.topic,
                    "state": base64.b64encode(e.state).decode()} for e in events],
    }
    return out


def main(path: str) -> None:
    out = record_session()
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"wrote {len(out['events'])} events of {len(out['rounds'])} rounds to {path}")


if __name__ == "__main__":
    main(sys.argv[1])
