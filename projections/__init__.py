"""The read side: balances, the round index and table/day reports, built from the event log.

Each projection keeps a set of PostgreSQL tables (a *view*) next to its tracking row, both
written in one transaction per batch of notifications, so every event counts exactly once and
a restart resumes where the last commit left off.

* :mod:`projections.balances`: every chip account, players' and each table's house.
* :mod:`projections.rounds`: one row per round, searchable by table, player, time, status and
  flags (the index choices are explained there).
* :mod:`projections.table_days`: per table and gaming day, the figures a casino reconciles.
* :mod:`projections.engine`: reads the ledger's log a page at a time and feeds the projections
  (why reading by id never skips a late event is explained there).
* :mod:`projections.worker`: ``run_worker``, what ``pitboss project`` runs.
* :mod:`projections.rebuild`: ``rebuild``, from event zero into fresh tables, swapped in.
* :mod:`projections.queries`: ``ReadModels``, the read facade the HTTP API serves.
* :mod:`projections.checks`: every projected balance against its account aggregate.
"""
