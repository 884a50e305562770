"""The read side: balances, round index and table/day reports built from the event log."""
