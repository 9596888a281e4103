"""The leases of the jobs a worker runs (:mod:`.worker`), renewed from a thread of their own.

Docket keeps a job's message with the worker that runs it while that worker renews its claim
(its lease) from its event loop; a tool that holds the loop (a blocking call inside an
``async`` tool) stops that renewal, and past the redelivery timeout another worker takes the
job as a dead worker's. :class:`JobLeases` renews the same claims from a thread, so a run is
alive while its worker is, and fences each run with its task's run count in the store: a run
whose task was counted again since (another worker took it over while this one was stopped)
is reported, never renewed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..logs import logger

__all__ = ["LEASE_BEAT_S", "Held", "JobLeases", "job_leases"]

log = logger("worker")

#: the longest time between two renewals of the jobs' leases (a quarter of the redelivery
#: timeout when that is shorter)
LEASE_BEAT_S = 1.0


@dataclass(eq=False)
class Held:
    """A job this worker runs: its task, its Docket message, and its run's number among the
    task's runs (the store's count when it began)."""

    task_id: str
    message_id: Any
    attempt: int
    #: another run of the task began since (set once, by the lease thread or the run's end)
    superseded: bool = False
    #: this run was told to stop for it
    stopped: bool = False


class JobLeases:
    """The leases of the jobs this worker runs, renewed from a thread of their own.

    Every ``interval_s`` the thread reads, in one round trip, the run count of each held
    job's task: a job whose count is still its run's has its message claimed again for this
    worker with its idle time reset (Docket's ``XCLAIM ... IDLE 0 JUSTID``, its own renewal,
    made here independently of the event loop); a job counted again since is another
    worker's now: it is not renewed, and ``superseded(held)`` is called (from the thread).
    ``client``: a synchronous redis-py client of the thread's own.

    The thread stops only with the whole process (``SIGSTOP``, a frozen machine): when it
    renewed nothing for ``lapse_s`` (:meth:`lapsed`), the leases may have lapsed and the jobs
    gone to other workers; the event loop then checks at once (:meth:`beat` from the loop,
    ``WorkerRuntime.check_leases``: a timer as overdue as the tools' own)."""

    def __init__(
        self,
        client: Any,
        *,
        stream: str,
        group: str,
        consumer: str,
        counter: Callable[[str], str],
        interval_s: float,
        lapse_s: float,
        superseded: Callable[[Held], None] = lambda held: None,
    ) -> None:
        self.client = client
        self.stream, self.group, self.consumer = stream, group, consumer
        self.counter = counter
        self.interval_s = interval_s
        self.lapse_s = lapse_s
        self.superseded = superseded
        #: when the last beat ended (``time.monotonic()``)
        self.renewed_at = time.monotonic()
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beats, name="mcp-tasks leases", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.client.close()

    def hold(self, held: Held) -> None:
        with self._lock:
            self._held[id(held)] = held

    def release(self, held: Held) -> None:
        with self._lock:
            self._held.pop(id(held), None)

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def lapsed(self) -> bool:
        """Whether no beat ended for ``lapse_s``: the process was stopped meanwhile."""
        return time.monotonic() - self.renewed_at > self.lapse_s

    def _beats(self) -> None:
        failing = False
        while not self._stop.wait(self.interval_s):
            try:
                for held in self.beat():
                    self.superseded(held)
            except Exception as exc:  # Redis away: Docket's own renewals fail alike
                if not failing:
                    log.warning("job leases not renewed (%s); trying again", exc)
                failing = True
            else:
                failing = False

    def beat(self) -> list[Held]:
        """One renewal of every held job's lease (see the class); the jobs found another
        run's, now marked ``superseded``."""
        held = [h for h in self.held() if not h.superseded]
        found: list[Held] = []
        if held:
            pipe = self.client.pipeline(transaction=False)
            for h in held:
                pipe.get(self.counter(h.task_id))
            live = []
            for h, count in zip(held, pipe.execute(), strict=True):
                if count is not None and int(count) != h.attempt:
                    h.superseded = True
                    found.append(h)
                else:
                    live.append(h.message_id)
            if live:
                self.client.xclaim(
                    self.stream, self.group, self.consumer, 0, live, idle=0, justid=True
                )
        self.renewed_at = time.monotonic()
        return found


def job_leases(
    docket: Any, worker: Any, url: str, counter: Callable[[str], str], redelivery_s: float
) -> JobLeases:
    """The leases of ``worker``'s jobs (a Docket ``Worker`` of ``docket``, on the Redis at
    ``url``; ``counter``: a task's run count key): renewed every second, or every quarter of
    the redelivery timeout when that is shorter; lapsed after half of it (not started)."""
    from redis import Redis

    wait_s = min(LEASE_BEAT_S * 2, redelivery_s / 2)
    return JobLeases(
        Redis.from_url(url, socket_timeout=wait_s, socket_connect_timeout=wait_s),
        stream=docket.stream_key,
        group=docket.worker_group_name,
        consumer=worker.name,
        counter=counter,
        interval_s=min(LEASE_BEAT_S, redelivery_s / 4),
        lapse_s=redelivery_s / 2,
    )
