"""The playing decisions a box owner makes on a hand (R-C1..R-C3, R-G4)."""

from __future__ import annotations

from enum import StrEnum


class Play(StrEnum):
    HIT = "hit"
    STAND = "stand"
    DOUBLE = "double"
    SPLIT = "split"
    SURRENDER = "surrender"
