"""Chip movements implied by a round's facts (R-M3, R-M4): pure, checked to sum to zero.

A :class:`Movement` changes one account's ``held`` and ``available`` chips. The
house of the table is the account named :data:`HOUSE_KEY`. For every fact, the
movements it implies sum to zero across all accounts: chips are only moved,
never made or lost, inside a round.

It also holds the currencies a table or an account may be opened in (ISO 4217, R-M1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ledger.engine import facts as f
from ledger.errors import InvariantBroken

HOUSE_KEY = ""  # the account key of the table's house

# The alphabetic codes of ISO 4217 that have a minor unit (R-M1 counts amounts in it; not
# XXX, XTS, the metals, the units of account or the fund codes such as USN and CLF, which no
# table plays in), those in use (to amendment 179, 2025) and those withdrawn since 2020 (a
# casino may still settle in one), so that a typo such as EUX is refused when a table or an
# account is opened in it: an account's currency cannot be changed, and its chips could go to
# no table. Tables and accounts stored before keep theirs. A code introduced after this list is
# refused until the list is extended.
CURRENCIES = frozenset("""
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD
    BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP
    DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HRK HTG HUF IDR ILS
    INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD
    MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR
    PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS
    SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU
    UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL
""".split())  # noqa: SIM905 (read as words)


class Movement(NamedTuple):
    held: int
    available: int


def _hold(bettor: str, amount: int) -> dict[str, Movement]:
    return {bettor: Movement(amount, -amount)}


def movements(fact: f.Fact) -> dict[str, Movement]:
    """The movements one fact implies, by account key (a bettor, or HOUSE_KEY)."""
    if isinstance(fact, f.StakePlaced):
        return _hold(fact.bettor, fact.amount)
    if isinstance(fact, f.StakeWithdrawn):
        return _hold(fact.bettor, -fact.amount)
    if isinstance(fact, f.HandDoubled | f.HandSplit):
        return _hold(fact.player, fact.amount)
    if isinstance(fact, f.DoubleMatched | f.SplitMatched | f.InsurancePlaced):
        return _hold(fact.bettor, fact.amount)
    if isinstance(fact, f.StakeSettled):
        return {fact.bettor: Movement(-fact.held, fact.released + fact.won),
                HOUSE_KEY: Movement(0, fact.lost - fact.won)}
    if isinstance(fact, f.RoundVoided):
        out: dict[str, Movement] = {}
        for bettor, amount in fact.released.items():
            _add(out, bettor, Movement(-amount, amount))
        for bettor, amount in fact.reversals.items():
            _add(out, bettor, Movement(0, amount))
            _add(out, HOUSE_KEY, Movement(0, -amount))
        return out
    if isinstance(fact, f.RulingRecorded):
        out = {}
        for player, amount in fact.adjustments.items():
            _add(out, player, Movement(0, amount))
            _add(out, HOUSE_KEY, Movement(0, -amount))
        return out
    return {}


def _add(out: dict[str, Movement], key: str, m: Movement) -> None:
    old = out.get(key, Movement(0, 0))
    out[key] = Movement(old.held + m.held, old.available + m.available)


def net_movements(facts: Iterable[f.Fact]) -> dict[str, Movement]:
    """The movements of a whole command, one per account, each fact checked to balance."""
    out: dict[str, Movement] = {}
    for fact in facts:
        moved = movements(fact)
        if not moved:  # most facts (a card, a hit, a stand) move nothing
            continue
        if sum(m.held + m.available for m in moved.values()):
            raise InvariantBroken(f"{type(fact).__name__} does not move chips to zero (R-M4)")
        for key, m in moved.items():
            _add(out, key, m)
    return {k: m for k, m in out.items() if m.held or m.available}
