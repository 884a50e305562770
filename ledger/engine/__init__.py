"""The round state machine: pure rules of RULES.md, driven by explicit decisions."""
