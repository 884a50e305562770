"""Balances: every chip account (players, and each table's house) as the ledger last left it.

One row per account: ``available`` and ``held`` chips (``total`` is their sum), what was bought
in and cashed out, the aggregate version and the notification id of the last event applied.
Each table is also a row of a second table (``balances_tables``: its id, name, currency and
house account id), so the house's result per table is one join of the two.

Every buy-in and cash-out is also a row of ``balances_movements``: when, whose, how much, in
which currency, the cashier (the key holder) who recorded it, and the account's totals bought
in and cashed out after it, indexed by time, so that a gaming day's figures at the cashier's
desk, and the movements behind them, come from one index range whatever the day's bounds
(:meth:`projections.queries.ReadModels.cashier_day`); the totals let a reader check each
movement against the one before it and the account's balance without summing its history. A
view made by an earlier version has no such rows for what it had counted:
``balances_settings.movements_listed_after`` (the moment the part was made) says so, until a
rebuild fills them in.

The figures follow the account events exactly as :class:`ledger.aggregates.account.Account`
applies them, and the same invariants are checked again here (R-M3): a player never below
zero, nothing held below zero, a house never holding chips. The table's CHECK constraints say
the same to anyone else who writes to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar
from uuid import UUID

from psycopg.sql import SQL, Composed, Identifier, Literal

from ledger.aggregates import ids
from ledger.aggregates.account import HOUSE, PLAYER, Account
from ledger.aggregates.table import Table
from ledger.errors import InvariantBroken
from projections.base import (
    ACCOUNT_STREAM,
    BatchProjection,
    Curs,
    Item,
    View,
    aggregate_ids,
    known_topics,
    load_rows,
    select_rows,
    upsert_rows,
    versioned,
)

_STREAMS = (ACCOUNT_STREAM, Table.Created.TOPIC)


class BalancesView(View):
    base = "balances"
    parts = ("accounts", "tables", "settings", "movements")

    def create_statements(self) -> list[Composed]:
        accounts, tables = self.qualified("accounts"), self.qualified("tables")
        return [
            SQL("CREATE TABLE IF NOT EXISTS {} ("
                "account_id uuid PRIMARY KEY, owner text NOT NULL, kind text NOT NULL, "
                "currency text NOT NULL, available bigint NOT NULL, held bigint NOT NULL, "
                "bought_in bigint NOT NULL, cashed_out bigint NOT NULL, "
                "version bigint NOT NULL, last_notification_id bigint NOT NULL, "
                "CONSTRAINT known_kind CHECK (kind IN ('player', 'house')), "
                "CONSTRAINT held_not_negative CHECK (held >= 0), "
                "CONSTRAINT player_not_overdrawn CHECK (kind <> 'player' OR available >= 0), "
                "CONSTRAINT house_holds_nothing CHECK (kind <> 'house' OR held = 0))"
                ).format(accounts),
            # Pages of balances in owner order, and one player's row, come from this index.
            self.added_index(self.name_of("accounts") + "_owner", "accounts",
                             "owner, account_id"),
            SQL("CREATE TABLE IF NOT EXISTS {} ("
                "table_id uuid PRIMARY KEY, name text NOT NULL, currency text NOT NULL, "
                "house_account_id uuid NOT NULL UNIQUE)").format(tables),
            # Pages of house results in table name order.
            self.added_index(self.name_of("tables") + "_name", "tables", "name, table_id"),
            # Made by a few commits before this one under other names: taken away, so that
            # the part is made again below and the view marked partial until a rebuild.
            SQL("DO $$ BEGIN IF to_regclass(quote_ident({schema}) || '.' || quote_ident({old})) "
                "IS NOT NULL THEN DROP TABLE {cashier}, {settings}; END IF; END $$").format(
                schema=Literal(self.datastore.schema), old=Literal(self.name_of("cashier")),
                cashier=self.qualified("cashier"), settings=self.qualified("settings")),
            # When the movements part was made for a view that had counted events already:
            # the movements before are not in it (no row: every movement is).
            SQL("CREATE TABLE IF NOT EXISTS {} (singleton boolean PRIMARY KEY DEFAULT true "
                "CHECK (singleton), movements_listed_after timestamptz)").format(
                self.qualified("settings")),
            SQL("DO $$ BEGIN IF to_regclass(quote_ident({schema}) || '.' || quote_ident({name})) "
                "IS NULL THEN "
                "CREATE TABLE {movements} (account_id uuid NOT NULL, version bigint NOT NULL, "
                "notification_id bigint NOT NULL, at timestamptz NOT NULL, "
                "kind text NOT NULL, owner text NOT NULL, currency text NOT NULL, "
                "amount bigint NOT NULL, cashier text NOT NULL, request_id text NOT NULL, "
                "bought_in_after bigint NOT NULL, cashed_out_after bigint NOT NULL, "
                "PRIMARY KEY (account_id, version), "
                "CONSTRAINT known_kind CHECK (kind IN ('buy_in', 'cash_out')), "
                "CONSTRAINT amount_positive CHECK (amount > 0)); "
                # A day's movements in time order, paged by keyset.
                "CREATE UNIQUE INDEX {by_time} ON {movements} (at, notification_id); "
                "INSERT INTO {settings} (movements_listed_after) SELECT now() WHERE EXISTS "
                "(SELECT 1 FROM {tracking} WHERE notification_id > 0); "
                "END IF; END $$").format(
                schema=Literal(self.datastore.schema), name=Literal(self.name_of("movements")),
                movements=self.qualified("movements"),
                by_time=Identifier(self.name_of("movements_by_time")),
                settings=self.qualified("settings"), tracking=self.qualified("tracking")),
        ]


_COLUMNS = ("account_id", "owner", "kind", "currency", "available", "held", "bought_in",
            "cashed_out", "version", "last_notification_id")
_CHANGING = ("available", "held", "bought_in", "cashed_out", "version", "last_notification_id")
BUY_IN, CASH_OUT = "buy_in", "cash_out"
_MOVEMENT_COLUMNS = ("account_id", "version", "notification_id", "at", "kind", "owner",
                     "currency", "amount", "cashier", "request_id", "bought_in_after",
                     "cashed_out_after")


class BalancesProjection(BatchProjection[BalancesView]):
    name = "balances"
    view_class: ClassVar[type[View]] = BalancesView
    streams = _STREAMS
    decoded = _STREAMS
    topics = known_topics(_STREAMS, Account, Table)

    def __init__(self, view: BalancesView) -> None:
        super().__init__(view)
        accounts = view.qualified("accounts")
        self._select = select_rows(accounts, _COLUMNS, "account_id")
        self._upsert = upsert_rows(accounts, _COLUMNS, "account_id", _CHANGING)
        self._upsert_table = SQL(
            "INSERT INTO {} (table_id, name, currency, house_account_id) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (table_id) DO NOTHING").format(
            view.qualified("tables"))
        self._insert_movement = SQL("INSERT INTO {} ({}) VALUES ({})").format(
            view.qualified("movements"), SQL(", ").join(map(Identifier, _MOVEMENT_COLUMNS)),
            SQL(", ").join(SQL("%({})s").format(SQL(c)) for c in _MOVEMENT_COLUMNS))

    def apply(self, curs: Curs, items: Sequence[Item]) -> None:
        # Opened accounts too, so an account opened again in a later batch is caught.
        rows = load_rows(curs, self._select, "account_id", aggregate_ids(items, ACCOUNT_STREAM))
        touched: dict[UUID, dict[str, Any]] = {}
        tables: list[tuple[UUID, str, str, UUID]] = []
        movements: list[dict[str, Any]] = []
        for item in items:
            event = item.event
            if isinstance(event, Table.Created):
                tables.append((event.originator_id, event.name, event.currency,
                               ids.house_id(event.originator_id)))
                continue
            row = _applied(rows.get(item.originator_id), item)
            rows[item.originator_id] = touched[item.originator_id] = row
            if isinstance(event, Account.BoughtIn | Account.CashedOut):
                movements.append({
                    "account_id": item.originator_id, "version": item.originator_version,
                    "notification_id": item.notification_id, "at": event.timestamp,
                    "kind": BUY_IN if isinstance(event, Account.BoughtIn) else CASH_OUT,
                    "owner": row["owner"], "currency": row["currency"], "amount": event.amount,
                    "cashier": event.actor, "request_id": event.request_id,
                    "bought_in_after": row["bought_in"], "cashed_out_after": row["cashed_out"]})
        if touched:
            curs.executemany(self._upsert, list(touched.values()))
        if tables:
            curs.executemany(self._upsert_table, tables)
        if movements:
            curs.executemany(self._insert_movement, movements)


def _applied(row: dict[str, Any] | None, item: Item) -> dict[str, Any]:
    """The account row after one of its events, as ``Account`` applies it (R-M3)."""
    event = item.event
    account_id = item.originator_id
    created = isinstance(event, Account.Created)
    fresh = {"account_id": account_id, "owner": event.owner, "kind": event.kind,
             "currency": event.currency, "available": 0, "held": 0, "bought_in": 0,
             "cashed_out": 0} if created else None
    row = versioned("account", row, item, fresh)
    if isinstance(event, Account.BoughtIn):
        row["available"] += event.amount
        row["bought_in"] += event.amount
    elif isinstance(event, Account.CashedOut):
        row["available"] -= event.amount
        row["cashed_out"] += event.amount
    elif isinstance(event, Account.Posted):
        row["held"] += event.held_delta
        row["available"] += event.available_delta
    elif not created:
        raise InvariantBroken(f"balances cannot apply {item.topic}: the projection must "
                              "learn this event before it can go on")
    row["last_notification_id"] = item.notification_id
    if row["held"] < 0 or (row["kind"] == PLAYER and row["available"] < 0) \
            or (row["kind"] == HOUSE and row["held"]):
        raise InvariantBroken(f"account {row['owner']} ({account_id}) would have available "
                              f"{row['available']} and held {row['held']} after notification "
                              f"{item.notification_id} (R-M3)")
    return row
