"""The 19 worked cases of RULES.md end to end through the GameLedger, on both stores.

The test functions are the very ones the engine passes in tests/unit; here the
``play`` fixture runs each step as a use case and reads every result back from
the stored events.
"""

from tests.unit.test_worked_cases import *  # noqa: F403
