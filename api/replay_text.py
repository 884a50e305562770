"""A round's replay as terminal text (``pitboss replay``): one line per event, cards as 7♠.

Frames are what ``GameLedger.replay`` (and ``GET /audit/rounds/<id>/replay``) return: each
event with the round's state right after it. After every card the table is drawn again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ledger.cards import Card, describe, hand_total, is_card


def card(code: str) -> str:
    if code == "hidden":
        return "??"
    return describe(Card(code)) if is_card(code) else code


def cards(codes: Iterable[str]) -> str:
    return " ".join(card(c) for c in codes) or "-"


def _where(data: Mapping[str, Any], split: Collection[int]) -> str:
    if data.get("line") == "insurance":
        return "insurance"
    if data.get("box") == 0:
        return "the dealer"
    return hand_label(data.get("box", 0), data.get("hand", 0), split)


def hand_label(box: int, hand: int, split: Collection[int]) -> str:
    """A hand as the events and the table both name it: "box 3", or once box 3 is split (in
    ``split``), "box 3.0", "box 3.1" … by hand number."""
    return f"box {box}.{hand}" if box in split or hand else f"box {box}"


def sentence(event_type: str, data: Mapping[str, Any], split: Collection[int] = ()) -> str:
    """What happened, in words; ``split``: the boxes split by then (their hands are named by
    number)."""
    d = data
    match event_type:
        case "Created" if "round_no" in d:
            return f"round {d['round_no']} opens under {d['rules']['name']} " \
                   f"v{d['rules']['version']} ({d['currency']}; rules {d['rules_hash'][:12]})"
        case "StakePlaced":
            return f"{d['bettor']} stakes {d['amount']} on box {d['box']}"
        case "StakeWithdrawn":
            return f"{d['bettor']} withdraws {d['amount']} from box {d['box']}"
        case "BettingClosed":
            return f"betting closes: {', '.join(d['players'])}"
        case "CardDealt" | "WildCardDrawn":
            face = "" if d.get("face_up", True) else " face down"
            return f"{card(d['card'])} to {_where(d, split)}{face} (shoe position {d['position']})"
        case "HoleCardRevealed":
            return f"the dealer turns over {card(d['card'])}"
        case "HandHit" | "HandStood" | "HandDoubled" | "HandSplit":
            verb = {"HandHit": "hits", "HandStood": "stands", "HandDoubled": "doubles",
                    "HandSplit": "splits"}[event_type]
            extra = f" (+{d['amount']})" if "amount" in d else ""
            return f"{d['player']} {verb} on {_where(d, split)}{extra}"
        case "DoubleMatched" | "SplitMatched":
            return f"{d['bettor']} matches on {_where(d, split)} (+{d['amount']})"
        case "DoubleDeclined" | "SplitDeclined":
            return f"{d['bettor']} declines on {_where(d, split)}"
        case "InsurancePlaced":
            return f"{d['bettor']} insures for {d['amount']}"
        case "BoxSurrendered":
            return f"{d['player']} surrenders box {d['box']}"
        case "StakeSettled" | "StakeForfeited":
            net = d["released"] + d["won"] - d["held"]
            prize = f", prize {d['prize']}" if d.get("prize") else ""
            outcome = str(d["outcome"]).replace("_", " ")  # even_money: even money
            return (f"{d['bettor']} on {_where(d, split)}: {outcome} {net:+d}{prize} "
                    f"({d['reason']}; {_arithmetic(d)})")
        case "DealerFinished":
            state = ("busts on" if d["bust"] else "has a natural," if d["natural"]
                     else "stands on soft" if _soft(d["cards"]) else "stands on")
            return f"the dealer {state} {d['total']}: {cards(d['cards'])}"
        case "RoundSettled":
            return f"round settled: {_results(d)}"
        case "RoundVoided":
            back = [f"{p} {n}" for p, n in sorted(d["released"].items()) if n]
            undone = [f"{p} {n:+d}" for p, n in sorted(d["reversals"].items()) if n]
            return (f"round voided: {d['reason']} (released: {', '.join(back) or 'nothing'}"
                    + (f"; settled results undone: {', '.join(undone)}" if undone else "")
                    + ")")
        case "ShoeAbandoned":
            return (f"the round's shoe is abandoned ({d['reason']}): it takes no more stakes "
                    "or decisions")
        case "RulingRecorded":
            moves = ", ".join(f"{p} {n:+d}" for p, n in sorted(d["adjustments"].items()))
            corrects = ", ".join(f"v{version}" for version in d["corrects"])
            return f"ruling: {d['reason']} ({moves}; corrects {corrects})"
    return event_type


def _results(d: Mapping[str, Any]) -> str:
    """Each player's net result and the house's, as a settlement (or a round's state) has them."""
    results = ", ".join(f"{p} {n:+d}" for p, n in sorted(d["results"].items()))
    return f"{results or 'no stakes'}; house {d['house_result']:+d}"


def _arithmetic(d: Mapping[str, Any]) -> str:
    """How a settlement's amounts follow: the stake, the rate, what rounding left (R-M2)."""
    (num, den), (left, over) = d["rate"], d["remainder"]
    parts = [f"stake {d['held']}", f"rate {num}:{den}"]
    if d["released"]:
        parts.append(f"{d['released']} back")
    if d["won"]:
        parts.append(f"{d['won']} paid")
    if left:
        # A fraction of the minor unit (cents): "5/2" on a table of 5-cent chips is 2½ cents.
        amount = f"{left}/{over}" if over != 1 else f"{left}"
        parts.append(f"{amount} minor unit{'s' if left > over else ''} rounded away")
    return ", ".join(parts)


def _soft(faces: Iterable[str]) -> bool:
    """Whether a hand's total counts an ace as 11."""
    return hand_total([Card(c) for c in faces])[1]


def split_boxes(state: Mapping[str, Any]) -> set[int]:
    return {b["box"] for b in state["boxes"] if len(b["hands"]) > 1}


def table(state: Mapping[str, Any]) -> list[str]:
    """The round's table right now: the dealer and each hand."""
    dealer = state["dealer"]
    soft = "soft " if dealer.get("soft") else ""  # (not in answers of earlier versions)
    lines = [f"      {'dealer':<8} {cards(dealer['cards']):<24} {soft}{dealer['total']}"]
    split = split_boxes(state)
    for b in state["boxes"]:
        # In the order the bettors came, the owner first (RULES.md, Terms): not the order of
        # the JSON object, which the API writes with its members sorted.
        order = {bettor: n for n, bettor in enumerate(b["bettors"])}
        for h in b["hands"]:
            label = hand_label(b["box"], h["hand"], split)
            stakes = ", ".join(f"{p} {a}" for p, a in sorted(
                h["stakes"].items(), key=lambda stake: order.get(stake[0], len(order))))
            total = f"{'soft ' if h['soft'] else ''}{h['total']}" if h["cards"] else ""
            standing = status(h, voided=state["phase"] == "voided",
                              over=state["phase"] == "settled")
            lines.append(f"      {label:<8} {cards(h['cards']):<24} {total:<8} {standing:<11}"
                         f" {stakes}")
    return lines


def status(hand: Mapping[str, Any], *, voided: bool = False, over: bool = False) -> str:
    """A hand's standing: voided with its round (whatever it was: a void undoes every
    outcome, R-X13); else bust, surrendered or forfeited; else a natural, doubled or stood;
    else settled (early, while the round is in play: a wild-card 21), done (21 reached), or
    still live. Once the round is ``over`` (settled) every hand is, and says how it ended."""
    if voided:
        return "voided"
    if hand["status"] != "live":
        return str(hand["status"])
    for flag in ("natural", "doubled", "stood", "settled", "done"):
        if hand.get(flag) and not (over and flag == "settled"):
            return flag
    return "live"


def header(event: Mapping[str, Any], state: Mapping[str, Any], opened: datetime,
           table_name: str | None = None) -> list[str]:
    """What names the round on a printout filed away: which round, table and shoe, when, and
    the rules and limits it was played under, as its first event recorded them."""
    d = event["data"]
    at = f"table {table_name} ({state['table_id']})" if table_name else \
        f"table {state['table_id']}"
    lines = [f"round {state['round_id']}: round {state['round_no']} at {at}",
             f"opened {opened:%Y-%m-%d %H:%M:%S} UTC (every time below is UTC); shoe "
             f"{state['shoe_id']}, its positions counted from 0"]
    if "rules" in d and "limits" in d:
        lim = d["limits"]
        lines += [f"rules {d['rules']['name']} v{d['rules']['version']}, content hash "
                  f"{d['rules_hash']}",
                  f"limits in {d['currency']} minor units: table minimum {lim['table_min']}, "
                  f"maximum {lim['table_max']}, minimum chip {lim['min_chip']}, minimum unit "
                  f"{lim['min_unit']}; {lim['boxes']} boxes"]
    return lines


def render(frames: Iterable[Mapping[str, Any]], *, table_name: str | None = None) -> list[str]:
    """Every frame as a line (the table drawn again after each card), under a
    :func:`header`; a line marks each new day (UTC)."""
    lines: list[str] = []
    day = None
    for frame in frames:
        event, state = frame["event"], frame["state"]
        at = datetime.fromisoformat(event["timestamp"]).astimezone(UTC)
        if day is None:
            lines += header(event, state, at, table_name)
        elif at.date() != day:
            lines.append(f"---- {at:%Y-%m-%d} (UTC)")
        day = at.date()
        when = at.strftime("%H:%M:%S.%f")[:12]
        lines.append(f"v{event['version']:<3} {when}  {event['actor'] or '-':<16} "
                     f"{sentence(event['type'], event['data'], split_boxes(state))}")
        if event["type"] in ("CardDealt", "WildCardDrawn", "HoleCardRevealed",
                             "HandSplit", "RoundSettled", "RoundVoided"):
            lines.extend(table(state))
        elif event["type"] == "RulingRecorded":  # the results the ruling leaves standing
            lines.append(f"      the round now stands: {_results(state)}")
    return lines
