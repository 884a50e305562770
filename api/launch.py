"""What the ``pitboss`` command runs: the command line (:mod:`api.cli`), loaded, then run.

Loading it takes a second or more (Flask, psycopg, the ledger); a Ctrl-C meanwhile printed a
traceback. It now ends the command as a Ctrl-C does once it runs: a sentence, and exit status
130, or for ``pitboss chain`` the status of a walk not made (an alarm reads 1 as an altered
record).
"""

from __future__ import annotations

import sys

INTERRUPTED_EXIT = 130  # the shell's status for a command ended by Ctrl-C (SIGINT)
# `pitboss chain` keeps exit status 1 for an altered record: could it not walk the chain (no
# database, no ledger there, interrupted, a defect), it exits with this, so that an alarm on
# it tells one from the other.
CHAIN_NOT_WALKED_EXIT = 3


def main() -> None:
    try:
        from api.cli import main as command_line
    except KeyboardInterrupt:
        chain = sys.argv[1:2] == ["chain"]
        print("interrupted while starting: " + ("the chain was not walked" if chain
                                                  else "nothing was done"), file=sys.stderr)
        raise SystemExit(CHAIN_NOT_WALKED_EXIT if chain else INTERRUPTED_EXIT) from None
    command_line()
