"""Opaque, signed ``tasks/list`` cursors (R-LIST-2, R-ERR-1).

A cursor names a position in one requestor's ``(created_at, task_id)`` keyset,
not a task, so it stays valid after the task it points at is deleted or expires.
It is HMAC-SHA256 signed over the requestor's identity too: a tampered cursor, or
one issued to another requestor or by another key, is rejected, with the one error
garbage gets (R-SEC-1: a refusal tells nothing of another requestor's cursors).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import secrets

_VERSION = b"1"
_MAC_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorError(ValueError):
    """The cursor was not issued by this codec for this requestor. One error whatever the
    cause (garbage, a tampered cursor, another requestor's, another key's): ``reason``
    names the cause for the server's own log, never for the requestor."""

    def __init__(self, reason: str) -> None:
        super().__init__("not issued by this server for this requestor")
        self.reason = reason


class CursorCodec:
    """Encode/decode keyset positions as signed opaque strings."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._key = secret if secret is not None else secrets.token_bytes(32)

    def _mac(self, requestor: str, payload: bytes) -> bytes:
        msg = requestor.encode("utf-8", "surrogatepass") + b"\x00" + payload
        return hmac.new(self._key, msg, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, requestor: str, created_at: float, task_id: str) -> str:
        payload = _VERSION + b"|" + repr(float(created_at)).encode() + b"|" + task_id.encode()
        return _b64(payload) + "." + _b64(self._mac(requestor, payload))

    def decode(self, requestor: str, cursor: str) -> tuple[float, str]:
        if not isinstance(cursor, str) or len(cursor) > 1024 or cursor.count(".") != 1:
            raise CursorError("malformed")
        body, mac = cursor.split(".")
        try:
            payload = _unb64(body)
            given = _unb64(mac)
        except (binascii.Error, ValueError):
            raise CursorError("malformed") from None
        if not hmac.compare_digest(given, self._mac(requestor, payload)):
            raise CursorError("bad signature")
        parts = payload.split(b"|", 2)
        if len(parts) != 3 or parts[0] != _VERSION:
            raise CursorError("unknown version")
        try:
            created_at = float(parts[1].decode())
            task_id = parts[2].decode()
        except (UnicodeDecodeError, ValueError):
            raise CursorError("malformed") from None
        if not math.isfinite(created_at):
            raise CursorError("malformed")
        return created_at, task_id
