"""Where everything lives in Redis: every key name is built here.

``NS`` is the namespace; ``TAG`` is a digest of the requestor, so every key of one
requestor carries the same Redis Cluster hash tag and each script touches one slot only.

- ``NS:{TAG}:t:ID``     hash: one task (fields: see ``codec.py``)
- ``NS:{TAG}:idx``      sorted set, all scores 0, members ``lexkey(created_at, ID)``:
                        keyset listing in ``(created_at, task_id)`` order with ``ZRANGEBYLEX``
- ``NS:{TAG}:active``   set of the requestor's non-terminal task IDs (``count_active``)
- ``NS:{TAG}:in:ID``    hash: pending input requests of a task (cross-instance delivery)
- ``NS:{TAG}:cl:ID``    hash: which result stream claimed an input, until when
- ``NS:{TAG}:ans:ID``   hash: answers waiting for the instance running the work
- ``NS:id:ID``          the task's requestor tag (``get`` by ID; cached per instance)
- ``NS:expiry``         sorted set by ``expires_at`` of ``TAG:lexkey``: ``pop_expired``
                        reads only what expired
- ``NS:all``            sorted set, all scores 0, members ``lexkey(created_at, ID) TAG``
                        (a space between): every requestor's tasks, for operators
                        (``list_all``); ``NS:all-ready`` once tasks stored before it was
                        kept are in it
- ``NS:instances``      sorted set: instance ID -> its last heartbeat, in store clock (ms)
- ``{NS:instances}:clock`` hash: the store clock leases are judged by (``t``, ``up``, ``o``:
                        ``_prelude.lua``); its hash tag puts it in the slot of ``NS:instances``
- ``NS:owned:INSTANCE`` set of ``TAG:ID``: the non-terminal tasks an instance runs (leases)
- ``NS:events``         pub/sub channel of task changes (cross-instance wake-ups)
- ``NS:cursor-secret``  signs listing cursors alike on every instance
"""

from __future__ import annotations

import hashlib
import struct


def lexkey(created_at: float, task_id: str) -> str:
    """16 hex digits ordering like the float, then the ID: byte order == (created_at, id)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", created_at))
    bits = bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}{task_id}"


#: Length of the ``lexkey`` prefix before the task ID.
LEX_PREFIX = 16


def all_member(lex: str, tag: str) -> str:
    """A task's member of ``NS:all``: its lexkey, a space (below every task ID character),
    its requestor's tag; ordered as ``(created_at, task_id)``."""
    return f"{lex} {tag}"


class Keys:
    """The key names of one namespace."""

    def __init__(self, namespace: str) -> None:
        if not namespace or any(c in namespace for c in "{}"):
            raise ValueError("namespace must be non-empty and contain no '{' or '}'")
        self.ns = namespace
        self.channel = f"{namespace}:events"
        self.expiry = f"{namespace}:expiry"
        self.instances = f"{namespace}:instances"
        #: the same Cluster slot as ``instances`` (its hash tag is that key's whole name)
        self.clock = f"{{{namespace}:instances}}:clock"
        self.secret = f"{namespace}:cursor-secret"
        self.all = f"{namespace}:all"
        self.all_ready = f"{namespace}:all-ready"

    @staticmethod
    def tag(requestor: str) -> str:
        return hashlib.sha256(requestor.encode()).hexdigest()[:24]

    def k(self, tag: str, kind: str, task_id: str = "") -> str:
        return f"{self.ns}:{{{tag}}}:{kind}{task_id}"

    def task(self, tag: str, task_id: str) -> str:
        return self.k(tag, "t:", task_id)

    def idx(self, tag: str) -> str:
        return self.k(tag, "idx")

    def active(self, tag: str) -> str:
        return self.k(tag, "active")

    def inputs(self, tag: str, task_id: str) -> list[str]:
        """The input hand-over keys of a task: pending, claims, answers."""
        return [
            self.k(tag, "in:", task_id),
            self.k(tag, "cl:", task_id),
            self.k(tag, "ans:", task_id),
        ]

    def task_keys(self, tag: str, task_id: str) -> list[str]:
        """task, active, in, cl, ans: what a status change touches."""
        return [self.task(tag, task_id), self.active(tag), *self.inputs(tag, task_id)]

    def unindex(self, tag: str, task_id: str, lex: str) -> list[list[str]]:
        """The commands that drop a deleted task's ID pointer and its entries in the
        namespace's indexes (``all``, ``expiry``: slots other than its own)."""
        return [
            ["DEL", self.ptr(task_id)],
            ["ZREM", self.all, all_member(lex, tag)],
            ["ZREM", self.expiry, f"{tag}:{lex}"],
        ]

    def ptr(self, task_id: str) -> str:
        return f"{self.ns}:id:{task_id}"

    def owned(self, instance: str) -> str:
        return f"{self.ns}:owned:{instance}"
