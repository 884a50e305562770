"""Rounds played through the HTTP API by basic-strategy players (``pitboss simulate``).

Each table is a terminal of its own: it opens the table, has the cashier open and fund its
players' accounts, then plays rounds: stakes, the deal, every decision from the round's
``legal`` list (the owner's play by basic strategy), the dealer's play and the settlement.
Basic strategy takes neither insurance nor even money: insurance pays 2:1 but wins less than a
third of the time (about 31% from a full 6-deck shoe) to a player who does not count cards
(R-C5), and even money is insurance on a natural (R-C6).
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from api.client import ApiError, Client
from ledger.cards import Card
from ledger.plays import Play
from ledger.strategy import basic_strategy

PLAYERS_PER_TABLE: Final = 3
BUY_IN: Final = 1_000_000
STAKES: Final = (10, 20, 25, 50, 100)
DECISIONS_PER_ROUND_MAX: Final = 200
# Where each decision of the round's legal list is sent.
PATHS: Final = {"hit": "hit", "stand": "stand", "double": "double", "split": "split",
                "surrender": "surrender", "close_betting": "deal", "play_dealer": "dealer",
                "settle": "settle", "decline": "decline"}


class SimulationError(Exception):
    """A round could not be played to its end."""


class SimulationStopped(SimulationError):
    """A table's terminal stopped on an error; ``tables`` are all the simulation's, each with
    what it left in play, if anything (``TablePlay.left_in_play``)."""

    def __init__(self, cause: BaseException, tables: list[TablePlay]) -> None:
        left = [t for t in tables if t.left_in_play()]
        super().__init__(f"{cause}" + (
            f"; {len(left)} round{'s' if len(left) > 1 else ''} left in play (named above): a "
            "dealer finishes each, or a manager voids it" if left else ""))
        self.tables = tables


class SimulationAbandoned(KeyboardInterrupt):
    """A second Ctrl-C: the tables left as they were (``tables``, each with what it left in
    play)."""

    def __init__(self, tables: list[TablePlay]) -> None:
        super().__init__()
        self.tables = tables


@dataclass
class Keys:
    """The clients of the roles a simulation needs."""

    dealer: Client
    cashier: Client

    @classmethod
    def discover(cls, url: str, keys: list[str]) -> Keys:
        """Sort keys by role (``GET /whoami``); a dealer's and a cashier's are needed."""
        by_role: dict[str, Client] = {}
        for key in keys:
            client = Client(url, key)
            by_role.setdefault(client.get("/whoami")["role"], client)
        missing = [r for r in ("dealer", "cashier") if r not in by_role]
        if missing:
            raise SimulationError(f"simulate needs a {' and a '.join(missing)} key (--key)")
        return cls(dealer=by_role["dealer"], cashier=by_role["cashier"])


@dataclass
class TablePlay:
    """One table's terminal: its players and its rounds."""

    dealer: Client
    cashier: Client
    preset: str
    name: str = field(default_factory=lambda: f"sim-{secrets.token_hex(4)}")
    seed: int | None = None
    on_decision: Callable[[str, float], None] | None = None
    table_id: str = ""
    players: list[str] = field(default_factory=list)
    rounds: list[str] = field(default_factory=list)
    in_play: str | None = None  # the round started and not yet settled or voided
    starting: bool = False  # a round's start sent, its answer not yet received

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def open(self) -> None:
        table = self.dealer.post("/tables", {"name": self.name, "preset": self.preset})
        self.table_id = table["id"]
        for n in range(1, PLAYERS_PER_TABLE + 1):
            player = f"{self.name}-P{n}"
            self.cashier.post("/accounts", {"player": player})
            self.cashier.post(f"/accounts/{player}/buy-in", {"amount": BUY_IN})
            self.players.append(player)

    def left_in_play(self) -> str | None:
        """What this terminal left in play: its round, or a start that went unanswered."""
        if self.in_play:
            return f"round {self.in_play}"
        if self.starting:
            return (f"a round whose start went unanswered, if it started (GET /tables/"
                    f"{self.table_id} names it as current_round_id)")
        return None

    def play_round(self) -> dict[str, Any]:
        """Play one round to its settlement; the settled round."""
        self.starting = True
        state = self.dealer.post(f"/tables/{self.table_id}/rounds")
        round_id = state["round_id"]
        self.rounds.append(round_id)
        self.in_play, self.starting = round_id, False
        for box, player in enumerate(self.players, 1):
            amount = self._random.choice(STAKES)
            state = self._decide(state, "stakes", {"bettor": player, "box": box,
                                                   "amount": amount})
        for _ in range(DECISIONS_PER_ROUND_MAX):
            if state["phase"] in ("settled", "voided"):
                self.in_play = None
                settled: dict[str, Any] = state
                return settled
            decision, body = next_decision(state)
            state = self._decide(state, PATHS[decision], body)
        raise SimulationError(f"round {round_id} did not end within "
                              f"{DECISIONS_PER_ROUND_MAX} decisions")

    def _decide(self, state: Mapping[str, Any], path: str,
                body: Mapping[str, Any] | None) -> Any:
        """Send a decision made on ``state`` (If-Match: its version); the round after it."""
        round_id = state["round_id"]
        clock = time.perf_counter()
        try:
            answer = self.dealer.post(f"/rounds/{round_id}/{path}", body,
                                      if_match=state["version"])
        except ApiError as error:
            if error.status not in (409, 412):
                raise
            # The round moved on meanwhile: look at it again and decide again.
            return self.dealer.get(f"/rounds/{round_id}")
        if self.on_decision is not None:
            self.on_decision(path, time.perf_counter() - clock)
        return answer["round"]


def next_decision(state: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The next decision of a round, from its legal list: the owner by basic strategy."""
    legal = state["legal"]
    names = {d["decision"] for d in legal}
    if state["phase"] == "betting":
        return "close_betting", None
    if "settle" in names:
        return "settle", None
    pending = [d for d in legal if d["decision"] == "decline"]
    if pending:
        d = pending[0]
        return "decline", {"bettor": d["player"], "box": d["box"], "hand": d["hand"]}
    turn = state["turn"]
    if turn is not None:
        box, hand = turn["box"], turn["hand"]
        owner = next(b for b in state["boxes"] if b["box"] == box)
        cards = next(h for h in owner["hands"] if h["hand"] == hand)["cards"]
        plays = [Play(d["decision"]) for d in legal
                 if d["box"] == box and d["decision"] in Play.__members__.values()
                 and (d["hand"] == hand or d["decision"] == Play.SURRENDER)]
        upcard = next(c for c in state["dealer"]["cards"] if c != "hidden")
        play = basic_strategy([Card(c) for c in cards], Card(upcard), plays)
        body: dict[str, Any] = {"player": owner["owner"], "box": box}
        if play is not Play.SURRENDER:
            body["hand"] = hand
        return play.value, body
    if "play_dealer" in names:
        return "play_dealer", None
    raise SimulationError(f"no decision to make in phase {state['phase']}: {sorted(names)}")
