"""The event-sourced aggregates: tables, shoes, rounds, chip accounts, request receipts, and
the rule sets' names and versions.

Every event class has an explicit, stable ``TOPIC`` (``pitboss:<Aggregate>.<Event>``)
so that moving or renaming a module never orphans stored events.
"""

from ledger.aggregates.account import Account
from ledger.aggregates.receipt import Receipt
from ledger.aggregates.round import Round
from ledger.aggregates.rule_set import RuleSetRecord
from ledger.aggregates.shoe import ShoeRecord
from ledger.aggregates.table import Table

__all__ = ["Account", "Receipt", "Round", "RuleSetRecord", "ShoeRecord", "Table"]
