"""The app's routes, read from its URL map, with placeholder values for their path parameters."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from flask import Flask

PUBLIC = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/<path:filename>",
                    "/static/<path:filename>"})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PARAM = re.compile(r"<[^<>]*>")


def routes(app: Flask) -> Iterator[tuple[str, str]]:
    """Every (method, rule) the app serves, but HEAD, OPTIONS and the public pages."""
    for rule in app.url_map.iter_rules():
        if rule.rule in PUBLIC or rule.endpoint.startswith("api-docs"):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            yield method, rule.rule


def param_names(rule: str) -> list[str]:
    return [m.group(0)[1:-1].split(":")[-1] for m in _PARAM.finditer(rule)]


def fill(rule: str, values: Mapping[str, object]) -> str:
    """The rule with each ``<converter:name>`` replaced by ``values[name]``."""
    return _PARAM.sub(lambda m: str(values[m.group(0)[1:-1].split(":")[-1]]), rule)
