"""Every refusal the ledger makes, typed, with a sentence and the rule it enforces.

Expected refusals derive from :class:`LedgerError`; each carries the id of the
rule of RULES.md it enforces (``rule``; none where RULES.md has no rule, as for a
table's opening and closing) and a sentence a dealer or an auditor understands.
Broken invariants are not refusals: they raise :class:`InvariantBroken`, which
nothing may catch and continue from.
"""

from __future__ import annotations


class LedgerError(Exception):
    """An expected refusal: the request breaks a rule and changed nothing."""

    kind = "refused"

    def __init__(self, message: str, rule: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.rule = rule
        self.field = field  # the argument at fault, where one is

    def __str__(self) -> str:
        return f"{self.message} ({self.rule})" if self.rule else self.message


class RuleSetInvalid(LedgerError):
    """A rule-set or table setting is out of range; names the field, and the rule: R-S1 for
    a rule set, R-X15 for the table's limits."""

    def __init__(self, field: str, reason: str, rule: str = "R-S1") -> None:
        super().__init__(f"Setting '{field}' is invalid: {reason}.", rule, field=field)
        self.field: str = field
        self.reason = reason


class BetRefused(LedgerError):
    """A stake breaks a table limit or a betting rule (R-C8, R-X14), or is in chips of
    another currency than the table's (R-M1)."""


class CurrencyRefused(LedgerError):
    """A table or an account is to be opened in no currency the ledger knows (R-M1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "R-M1", field="currency")


class NameRefused(LedgerError):
    """A name given (a table's, a player's, an actor's) is not one the ledger keeps names as
    (R-S1); names the field where the name was given in one."""


class DealRefused(LedgerError):
    """Betting cannot close and the cards cannot be dealt (R-C8, R-H4)."""


class DecisionRefused(LedgerError):
    """A playing decision is not allowed at this moment."""


class QueryRefused(DecisionRefused):
    """An argument of a query is not one it takes; names the argument (``field``)."""


class NotYourTurn(DecisionRefused):
    """Somebody acted on a hand whose turn has not come or has passed."""


class NotTheOwner(DecisionRefused):
    """A co-bettor or a stranger tried to make the box owner's decision (R-C4)."""


class RoundClosed(LedgerError):
    """The round is settled or voided and takes no more decisions (R-V1, R-V2)."""


class InsufficientChips(LedgerError):
    """The bettor's available balance does not cover the amount (R-M3)."""


class AccountExists(LedgerError):
    """The player already has an account: one per player (R-M3 reads its balance)."""


class TableExists(LedgerError):
    """A table of that name is open or was: a name stands for one table."""


class RoundInPlay(LedgerError):
    """The table's round has not ended: what comes next at the table waits for it (R-V1)."""


class NotFound(LedgerError):
    """The table, round, shoe or account does not exist."""

    kind = "not_found"


class Conflict(LedgerError):
    """Another command changed the same thing first; nothing was changed (retry)."""

    kind = "conflict"


class StaleVersion(Conflict):
    """The round is no longer at the version the terminal saw; nothing was changed."""

    kind = "stale"

    def __init__(self, seen: int, now: int) -> None:
        what = (f"The round has changed since version {seen} was shown" if seen < now else
                f"The round has no version {seen} yet")
        super().__init__(f"{what} (it is at version {now}); nothing was changed. Look at the "
                         "round again and decide again.")
        self.seen = seen
        self.now = now


class RequestIdReused(LedgerError):
    """A request id came back with different content; the first request stands."""

    def __init__(self, request_id: str, command: str | None) -> None:
        used = (f"for a different request ({command.replace('_', ' ')})" if command
                else "by another key holder")
        # Over HTTP the request's id is its Idempotency-Key header.
        super().__init__(f"The request key (Idempotency-Key) '{request_id}' was already used "
                         f"{used}, and that request stands; send a new key (a UUID) for a new "
                         "request.", "R-M4")


class TableClosed(LedgerError):
    """The table is closed and starts no round."""


class TableOpen(LedgerError):
    """The table is open: there is nothing to reopen."""


class ShoeLive(LedgerError):
    """The shoe is live: its order is not revealed, so it cannot be verified yet (R-H2)."""


class ShoeKept(LedgerError):
    """The shoe cannot be abandoned: it is retired already, or the shoe key opens it, and it
    retires as the rules say, revealed (R-H2)."""


class ShoeExhausted(LedgerError):
    """The shoe has no card left to deal (R-H4)."""

    def __init__(self) -> None:
        super().__init__("The shoe has no card left; the round must be voided.", "R-H4")


class InvariantBroken(Exception):
    """A guarantee of the ledger does not hold (money not conserved, a stake settled twice).

    This is a defect, never an expected refusal: it must fail loudly.
    """
