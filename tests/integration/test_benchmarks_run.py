"""Each benchmark runs to its end at a tiny size, so that bench/ does not fall behind the code
it measures (its figures are not checked: speed is the benchmarks' business, not the tests')."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from api.database import DatabaseSettings

SMALL = {
    "engine": ["--rounds", "200", "--quiet"],
    "ledger": ["--rounds", "4", "--inserts", "20", "--warmup", "1", "--replays", "2",
               "--profile-rounds", "2", "--write-path", "10", "--what-if", "2",
               "--idle-gap", "5"],
    "projections": ["--events", "3000", "--sample-rounds", "5", "--stock-seconds", "1",
                    "--lag-seconds", "1", "--writers", "1", "--search-rounds", "2000"],
    "api": ["--seconds", "0.5", "--terminals", "1", "--workers", "1", "--threads", "2",
            "--replays", "2", "--slices", "1"],
}


@pytest.mark.parametrize("name", list(SMALL))
def test_the_benchmark_runs_to_its_end(name: str, database: DatabaseSettings) -> None:
    # On the session's server, in a schema of the benchmark's own (bench.common.database).
    env = {**os.environ, "DATABASE_URL": database.url()}
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", *SMALL[name]], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]
