"""Each benchmark runs to its end at a tiny size, so that bench/ does not fall behind the code
it measures (its figures are not checked: speed is the benchmarks' business, not the tests')."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

from api.database import DatabaseSettings

# Each at the sizes of the quick look its --help gives.
NAMES = ("engine", "ledger", "projections", "api")


@pytest.mark.parametrize("name", NAMES)
def test_the_benchmark_runs_to_its_end(name: str, database: DatabaseSettings) -> None:
    # On the session's server, in a schema of the benchmark's own (bench.common.database).
    env = {**os.environ, "DATABASE_URL": database.url()}
    quick_look = importlib.import_module(f"bench.{name}").QUICK_LOOK
    done = subprocess.run([sys.executable, "-m", f"bench.{name}", *quick_look], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]


@pytest.mark.parametrize("name", NAMES)
def test_the_benchmarks_help_gives_each_size_its_default_and_the_quick_look(name: str) -> None:
    quick_look = importlib.import_module(f"bench.{name}").QUICK_LOOK
    shown = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    # One entry an option, its wrapped lines included.
    entries = {entry.split()[0]: " ".join(entry.split())
               for entry in re.split(r"\n  (?=--)", shown.split("options:")[1])[1:]}
    sizes = [option for option, value in zip(quick_look, [*quick_look[1:], "--"], strict=True)
             if option.startswith("--") and not value.startswith("--")]
    assert sizes
    for size in sizes:
        assert "(default: " in entries[size], entries[size]
    assert " ".join(quick_look) in " ".join(shown.split())
