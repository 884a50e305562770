"""Sealing a live shoe's order (R-H2): durable in the event log, unreadable without the key.

The order and salt of a shoe are stored in its creation event encrypted with
AES-256-GCM under the ledger's shoe key, with the shoe id as associated data (a
sealed order copied onto another shoe does not open). Dealers and auditors can
read every event and still learn nothing of the order until the shoe retires
and its reveal event publishes order and salt, which anyone can check against
the commitment recorded before the first card.

The same key signs the accounts' and tables' snapshots (:class:`SnapshotSigner`), which
sit outside the event table's hash chain.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import replace
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.persistence import StoredEvent

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
                                  "key (wrong key, or the record was altered; if the key that "
                                  "sealed it is lost: pitboss shoes abandon)") from None
        data = json.loads(plain)
        return [Card(c) for c in data["order"]], bytes.fromhex(data["salt"])


class SnapshotSigner:
    """Signs the snapshots of accounts and tables (HMAC-SHA256 under a key derived from the
    shoe key), so that a snapshot written around the ledger, by anyone who can write the
    database but does not hold the key, is never read as an account's or a table's state.

    The tag covers the aggregate id, version and topic as well as the state: a genuine
    snapshot copied to another aggregate or version does not verify either."""

    TAG_BYTES = 32
    _CONTEXT = b"pitboss account snapshots v1"  # as first named: it derives the signing key

    def __init__(self, shoe_key: bytes) -> None:
        self._key = hmac.new(shoe_key, self._CONTEXT, hashlib.sha256).digest()

    def _tag(self, stored: StoredEvent, state: bytes) -> bytes:
        head = UUID(str(stored.originator_id)).bytes + stored.originator_version.to_bytes(
            8, "big", signed=True) + stored.topic.encode() + b"\0"
        return hmac.new(self._key, head + state, hashlib.sha256).digest()

    def sign(self, stored: StoredEvent) -> StoredEvent:
        return replace(stored, state=stored.state + self._tag(stored, stored.state))

    def verify(self, stored: StoredEvent) -> StoredEvent | None:
        """The snapshot without its tag, or None when the tag does not verify."""
        state, tag = stored.state[:-self.TAG_BYTES], stored.state[-self.TAG_BYTES:]
        if len(stored.state) < self.TAG_BYTES or not hmac.compare_digest(
                tag, self._tag(stored, state)):
            return None
        return replace(stored, state=state)
