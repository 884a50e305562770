"""The configuration the README documents is the configuration deploy/env.example lists."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _readme_variables() -> set[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`",
                                                         row.split("|")[1])}


def test_env_example_lists_every_variable_of_the_readme() -> None:
    listed = set(re.findall(r"^# ?([A-Z][A-Z0-9_]+)=", (ROOT / "deploy" / "env.example")
                            .read_text(), flags=re.MULTILINE))
    documented = _readme_variables()
    assert len(documented) > 20
    assert documented - listed == set()


def _refusals(cls: type[Any]) -> set[type[Any]]:
    children: list[type[Any]] = cls.__subclasses__()
    return {cls, *(sub for child in children for sub in _refusals(child))}


def test_the_readme_names_every_type_a_422_refusal_may_carry() -> None:
    # A refusal added without its name in the Errors table left a client's author guessing.
    from ledger.errors import LedgerError
    from projections.queries import QueryTooBroad  # (a subclass: imported to be listed)

    refused = {cls.__name__ for cls in _refusals(LedgerError) - {LedgerError}
               if cls.kind == "refused"} - {"ShoeKept"}  # `pitboss shoes abandon`'s alone
    assert "QueryTooBroad" in refused, QueryTooBroad
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| 422 | the ledger"))
    assert refused - set(re.findall(r"`([A-Z][A-Za-z]+)`", row)) == set()
