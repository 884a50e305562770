"""Unit tests run the rules engine alone: no I/O."""

from __future__ import annotations

import pytest

from tests.scripted import Scripted, Start


@pytest.fixture
def play() -> Start:
    """Start a scripted round on the bare round machine."""
    return Scripted
