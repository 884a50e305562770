"""The blackjack domain: cards, shoe, rules, settlement and the event-sourced aggregates."""
