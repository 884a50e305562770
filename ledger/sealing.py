"""Sealing a live shoe's order (R-H2): durable in the event log, unreadable without the key.

The order and salt of a shoe are stored in its creation event encrypted with
AES-256-GCM under the ledger's shoe key, with the shoe id as associated data (a
sealed order copied onto another shoe does not open). Dealers and auditors can
read every event and still learn nothing of the order until the shoe retires
and its reveal event publishes order and salt, which anyone can check against
the commitment recorded before the first card.
"""

from __future__ import annotations

import base64
import json
import os
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ledger.cards import Card
from ledger.errors import InvariantBroken

SCHEME = "aes256gcm-v1"
KEY_BYTES = 32
NONCE_BYTES = 12


class ShoeSealer:
    """Seals and opens shoe orders with one 256-bit key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a shoe key is {KEY_BYTES} bytes")
        self._aead = AESGCM(key)

    @staticmethod
    def new_key() -> bytes:
        return AESGCM.generate_key(bit_length=256)

    def seal(self, shoe_id: UUID, order: list[Card], salt: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        plain = json.dumps({"order": order, "salt": salt.hex()}, separators=(",", ":"))
        sealed = self._aead.encrypt(nonce, plain.encode(), shoe_id.bytes)
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, shoe_id: UUID, sealed: str) -> tuple[list[Card], bytes]:
        raw = base64.b64decode(sealed)
        try:
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], shoe_id.bytes)
        except InvalidTag:
            raise InvariantBroken(f"the sealed order of shoe {shoe_id} does not open with this "
                                  "key (wrong key, or the record was altered)") from None
        data = json.loads(plain)
        return [Card(c) for c in data["order"]], bytes.fromhex(data["salt"])
