"""The event-sourced aggregates: tables, shoes, rounds, chip accounts, request receipts.

Every event class has an explicit, stable ``TOPIC`` (``pitboss:<Aggregate>.<Event>``)
so that moving or renaming a module never orphans stored events.
"""

from ledger.aggregates.account import Account
from ledger.aggregates.receipt import Receipt
from ledger.aggregates.round import Round
from ledger.aggregates.shoe import ShoeRecord
from ledger.aggregates.table import Table

__all__ = ["Account", "Receipt", "Round", "ShoeRecord", "Table"]
