"""The store-conformance suite on ``RedisTaskStore``, plus what only Redis has:
keys and hash tags, Redis-side expiry, leases, change events, input hand-over, outages."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_tasks.errors import StoreUnavailable
from mcp_tasks.lifecycle import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING
from mcp_tasks.protocol import REVISION
from mcp_tasks.runtime.engine.cursor import CursorCodec
from mcp_tasks.runtime.stores.redis import RedisTaskStore
from mcp_tasks.store import SharedTaskStore
from mcp_tasks.testing.store_conformance import T0, SharedStoreConformance, record
from testkit.redis_fixtures import RedisServer, unique_namespace
from testkit.wait import until_async

pytestmark = pytest.mark.anyio


class TestRedisTaskStore(SharedStoreConformance):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_server: RedisServer) -> None:
        self.url = redis_server.url

    async def make_store(self, tmp_path: Path) -> SharedTaskStore:
        return RedisTaskStore(self.url, namespace=unique_namespace(), lease_s=0.3)

    async def make_peer(self, store: SharedTaskStore) -> SharedTaskStore:
        assert isinstance(store, RedisTaskStore)
        return RedisTaskStore(self.url, namespace=store.ns, lease_s=0.3)


class TestRedisTaskStoreThroughRedisPy(TestRedisTaskStore):
    """The same suite where the store cannot use its own connection (no ``hiredis``, or a
    client it cannot speak for): every pipeline goes through redis-py's."""

    @pytest.fixture(autouse=True)
    def _no_wire(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from mcp_tasks.runtime.stores.redis import wire

        monkeypatch.setattr(wire, "hiredis", None)

    async def make_store(self, tmp_path: Path) -> SharedTaskStore:
        store = await super().make_store(tmp_path)
        assert isinstance(store, RedisTaskStore) and store._run._wire is None
        return store


async def test_a_pipeline_cancelled_in_flight_leaves_the_next_one_its_own_replies(
    redis_url: str,
) -> None:
    """The store's own connection (``wire.py``): a caller gone while its replies are on
    their way (here a blocking pop) takes the connection with it; the next pipeline gets
    its own replies on a new one, never the late ones."""
    from mcp_tasks.runtime.stores.redis.wire import Wire, pack

    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    wire = Wire.of(store.redis)
    assert wire is not None
    try:
        with anyio.move_on_after(0.1):
            await wire.execute([pack(["BLPOP", f"{store.ns}:nothing", "0.3"])])
        await store.redis.rpush(f"{store.ns}:nothing", "late")
        assert await wire.execute([pack(["PING"]), pack(["ECHO", "mine"])]) == ["PONG", "mine"]
    finally:
        wire.close()
        await store.close()


async def _keys(store: RedisTaskStore) -> list[str]:
    return sorted(str(k) for k in await store.redis.keys(f"{store.ns}:*"))


async def test_keys_namespaced_with_requestor_hash_tag(redis_url: str) -> None:
    ns = unique_namespace()
    store = RedisTaskStore(redis_url, namespace=ns)
    try:
        await store.create(record("t1", "alice"))
        tag = store.tag("alice")
        keys = await _keys(store)
        assert all(k.startswith(ns + ":") for k in keys)
        task_keys = [k for k in keys if ":{" in k]
        assert task_keys and all(f":{{{tag}}}:" in k for k in task_keys)
        # a requestor name with braces does not break the tag
        await store.create(record("t2", "we{ird}"))
        got = await store.get("t2")
        assert got is not None and got.requestor == "we{ird}"
        with pytest.raises(ValueError):
            RedisTaskStore(redis_url, namespace="a{b}")
    finally:
        await store.close()


async def test_redis_expiry_backstop_and_no_leftovers(redis_url: str) -> None:
    """Task keys carry a Redis expiry (ttl + grace); deleting/expiring leaves no keys."""
    store = RedisTaskStore(redis_url, namespace=unique_namespace(), expiry_grace_s=0.2)
    try:
        import time

        now = time.time()
        await store.create(record("short", created_at=now, ttl_ms=100))
        await store.create(record("forever", created_at=now, ttl_ms=None))
        pttl = await store.redis.pttl(f"{store.ns}:{{{store.tag('alice')}}}:t:short")
        assert 0 < pttl <= 300
        key = f"{store.ns}:{{{store.tag('alice')}}}:t:short"
        await until_async(lambda: store.redis.exists(key), satisfied=lambda n: not n, what="expiry")
        # Redis expired it before any sweep: listing and counting skip the leftovers
        assert [r.task_id for r in await store.list_tasks("alice", after=None, limit=10)] == [
            "forever"
        ]
        assert await store.get("short") is None
        popped = await store.pop_expired(now + 10, 100)
        assert popped == []  # already gone: nothing to report, index cleaned
        assert await store.count_active("alice") == 1
        await store.delete("forever")
        assert await _keys(store) == []
    finally:
        await store.close()


def _task_keys(store: RedisTaskStore, task_id: str, requestor: str = "alice") -> list[str]:
    """Every key of one task: its hash, its input hand-over keys (pending, claims, answers)
    and its ID pointer; the requestor's index and active set are shared by its tasks."""
    tag = store.tag(requestor)
    return [
        store.keys.task(tag, task_id),
        *store.keys.inputs(tag, task_id),
        store.keys.ptr(task_id),
    ]


async def _pttls(store: RedisTaskStore, keys: list[str]) -> dict[str, int]:
    return {k.rsplit(":", 2)[-2]: int(await store.redis.pttl(k)) for k in keys}


#: how far below its set value a key's remaining time may have run down while the test
#: went on (a loaded two-core machine): generous, the checked values are a minute apart
SLACK_MS = 20_000


async def test_every_key_of_a_task_expires_with_it_R_TTL_3(redis_url: str) -> None:
    """R-TTL-3, R-SEC-4 (clean up expired tasks): the Redis expiry (the task's ttl plus the
    grace, the backstop for when no engine sweeps) is on every key of the task, not only its
    hash: the ID pointer and each input hand-over key (pending, claims, answers) as it
    appears; ``set_ttl`` moves it on all of them by the change of ttl (R-TTL-2). A task
    without a ttl has no expiry on any key."""
    grace_s, ttl_ms = 1.0, 60_000
    store = RedisTaskStore(redis_url, namespace=unique_namespace(), expiry_grace_s=grace_s)
    try:
        keys = _task_keys(store, "t1")
        await store.create(record("t1", status=WORKING, ttl_ms=ttl_ms))
        for n in ("i1", "i2"):
            item: dict[str, Any] = {"id": n, "method": "elicitation/create", "params": {}}
            assert await store.put_input("t1", "alice", item)
        assert len(await store.claim_inputs("t1", "alice", "stream-1", 30.0)) == 2
        assert await store.answer_input("t1", "alice", "i1", {"result": {"action": "accept"}})
        assert await store.redis.exists(*keys) == len(keys), keys  # all five exist
        want = ttl_ms + int(grace_s * 1000)
        for key, pttl in (await _pttls(store, keys)).items():
            assert want - SLACK_MS < pttl <= want, (key, pttl, want)

        longer = 120_000
        assert await store.set_ttl("t1", longer) is not None
        want += longer - ttl_ms
        for key, pttl in (await _pttls(store, keys)).items():
            assert want - SLACK_MS < pttl <= want, (key, pttl, want)

        await store.create(record("forever", status=WORKING, ttl_ms=None))
        assert await store.put_input("forever", "alice", {**item, "id": "i1"})
        forever = _task_keys(store, "forever")
        assert {k: await store.redis.pttl(k) for k in (forever[0], forever[1], forever[4])} == {
            forever[0]: -1, forever[1]: -1, forever[4]: -1
        }  # fmt: skip
    finally:
        await store.close()


async def test_a_terminal_tasks_keys_expire_at_its_ttl_R_TTL_3(redis_url: str) -> None:
    """R-TTL-3: an ended task (its result kept for ``tasks/result``) is deleted by Redis at
    its ttl plus the grace with no engine sweeping: ending it keeps the expiry (its hash and
    ID pointer both go), while a task of the same requestor with a long ttl stays."""
    import time

    store = RedisTaskStore(redis_url, namespace=unique_namespace(), expiry_grace_s=0.2)
    try:
        now = time.time()
        await store.create(record("short", created_at=now, ttl_ms=300, status=WORKING))
        await store.create(record("long", created_at=now, ttl_ms=600_000, status=WORKING))
        done = await store.transition("short", COMPLETED, now=now, result={"content": []})
        assert done is not None and done.status == COMPLETED
        task, ptr = _task_keys(store, "short")[0], store.keys.ptr("short")
        assert 0 < await store.redis.pttl(task) <= 500 and 0 < await store.redis.pttl(ptr) <= 500
        await until_async(
            lambda: store.redis.exists(task, ptr), satisfied=lambda n: not n, what="expiry"
        )
        assert await store.get("short") is None
        long = await store.get("long")
        assert long is not None and long.status == WORKING
        assert await store.redis.pttl(_task_keys(store, "long")[0]) > 500_000
    finally:
        await store.close()


async def test_the_url_names_the_namespace_and_the_lease(redis_url: str) -> None:
    """``RedisTaskStore.from_url``: ``namespace`` and ``lease`` are the store's, any other
    query option goes to redis-py."""
    ns = unique_namespace()
    store = RedisTaskStore.from_url(f"{redis_url}?namespace={ns}&lease=2.5&socket_timeout=7")
    try:
        assert (store.ns, store.lease_s) == (ns, 2.5)
        kwargs = store.redis.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == 7.0 and "lease" not in kwargs
        await store.create(record("t1"))
        assert await _keys(store) and all(k.startswith(ns + ":") for k in await _keys(store))
    finally:
        await store.close()


@pytest.mark.parametrize("text", ["s", "msg", "u", "v", "r", "res", "err", "o"])
async def test_values_that_spell_a_field_name_round_trip(redis_url: str, text: str) -> None:
    """A task's hash comes back from the scripts as one JSON object of field -> value
    (``_prelude.lua``'s ``hash_json``): a value that happens to spell one of the store's
    own field names (a status message, a tool, a requestor) is a value, never a field."""
    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    try:
        rec = record("t1", requestor=text, status=WORKING)
        rec.tool = text
        await store.create(rec)
        moved = await store.transition("t1", INPUT_REQUIRED, now=T0 + 1, status_message=text)
        assert moved is not None
        got = await store.get("t1")
        for r in (moved, got):
            assert r is not None
            assert (r.status, r.status_message, r.tool, r.requestor) == (
                INPUT_REQUIRED, text, text, text
            )  # fmt: skip
    finally:
        await store.close()


async def test_late_completion_after_cancel_on_other_instance(redis_url: str) -> None:
    ns = unique_namespace()
    a = RedisTaskStore(redis_url, namespace=ns)
    b = RedisTaskStore(redis_url, namespace=ns)
    try:
        await a.create(record("t1"))
        assert (await b.transition("t1", CANCELLED, now=T0 + 1)) is not None
        assert await a.transition("t1", COMPLETED, now=T0 + 2, result={"late": True}) is None
        got = await a.get("t1")
        assert got is not None and got.status == CANCELLED and got.result is None
        # the cancel on b removed the task from a's lease set
        assert await a.redis.smembers(a.keys.owned(a.instance_id)) == set()
    finally:
        await a.close()
        await b.close()


async def test_watch_wakes_on_change_from_other_instance(redis_url: str) -> None:
    ns = unique_namespace()
    async with (
        RedisTaskStore(redis_url, namespace=ns) as a,
        RedisTaskStore(redis_url, namespace=ns) as b,
    ):
        await b.create(record("t1"))
        with a.watch("t1") as w:
            assert await w.wait(0.05) in (True, False)  # drain the listener's initial wake-up
            await b.transition("t1", COMPLETED, now=T0 + 1, result={"ok": 1})
            with anyio.fail_after(20):
                assert await w.wait(15) is True
        # without a change, wait times out (the bounded fallback poll)
        with a.watch("t1") as w:
            await w.wait(0.05)
            assert await w.wait(0.05) is False


async def test_unreachable_redis_is_store_unavailable_and_recovers(
    fresh_redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R-ERR-1: clients get a plain "Task store unavailable"; the address and the
    exception go to the server log, once per outage."""
    store = RedisTaskStore(fresh_redis_server.url, namespace=unique_namespace())
    address = f"127.0.0.1:{fresh_redis_server.port}"
    try:
        await store.create(record("t1"))
        fresh_redis_server.stop()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mcp_tasks.runtime.stores.redis"):
            for call in (
                store.get("t1"),
                store.create(record("t2")),
                store.count_active("alice"),
                store.list_tasks("alice", after=None, limit=5),
            ):
                with anyio.fail_after(30), pytest.raises(StoreUnavailable) as ei:
                    await call
                err = ei.value.to_error()
                assert err["code"] == -32603
                assert err["message"] == "Task store unavailable"
                assert address not in err["message"] and "Error" not in err["message"]
                assert "data" not in err
        down = [r for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(down) == 1  # once per outage, not per call
        assert (
            down[0].name == "mcp_tasks.runtime.stores.redis" and down[0].levelno == logging.WARNING
        )
        assert address in down[0].getMessage() and "ConnectionError" in down[0].getMessage()
        fresh_redis_server.start()
        # no persistence: the data is gone, but the store works again by itself
        with caplog.at_level(logging.WARNING, logger="mcp_tasks.runtime.stores.redis"):
            assert await store.get("t1") is None
        assert any("available again" in r.getMessage() for r in caplog.records)
        await store.create(record("t3"))
        r = await store.transition("t3", COMPLETED, now=T0 + 1, result={"ok": True})
        assert r is not None and r.result == {"ok": True}
    finally:
        await store.close()


async def test_cursor_secret_agreed_again_after_redis_lost_it(
    fresh_redis_server: RedisServer,
) -> None:
    """R-LIST-2: no cursor_secret configured; Redis restarts without persistence and one
    instance restarts: cursors of either instance verify on the other, no other restart."""
    ns = unique_namespace()
    url = fresh_redis_server.url
    a, b = RedisTaskStore(url, namespace=ns), RedisTaskStore(url, namespace=ns)
    b2: RedisTaskStore | None = None
    try:
        async with anyio.create_task_group() as tg:
            await a.start(tg)
            await b.start(tg)
            assert await a.shared_secret() == await b.shared_secret()
            fresh_redis_server.stop()
            with pytest.raises(StoreUnavailable):  # a notices the outage (e.g. its sweep)
                await a.count_active("alice")
            fresh_redis_server.start()
            await b.close()  # instance B restarts
            b2 = RedisTaskStore(url, namespace=ns)
            await b2.start(tg)
            for signer, verifier in ((b2, a), (a, b2)):
                cursor = CursorCodec(await signer.shared_secret()).encode("alice", T0, "t1")
                codec = CursorCodec(await verifier.shared_secret())
                assert codec.decode("alice", cursor) == (T0, "t1")
            tg.cancel_scope.cancel()
    finally:
        for s in (a, b, b2):
            if s is not None:
                await s.close()


async def test_cursor_secret_followed_without_a_noticed_outage(
    redis_url: str,
) -> None:
    """An instance that saw no error still adopts a secret Redis replaced (the heartbeat
    re-reads it), and ``shared_secret`` costs no round trip while cached."""
    ns = unique_namespace()
    a = RedisTaskStore(redis_url, namespace=ns, lease_s=0.3)
    try:
        subscribed = anyio.Event()
        a.events.on_subscribed.append(subscribed.set)
        async with anyio.create_task_group() as tg:
            await a.start(tg)
            with anyio.fail_after(10):  # subscribing forgets the cached secret once
                await subscribed.wait()
            first = await a.shared_secret()
            trips = a.round_trips
            assert await a.shared_secret() == first and a.round_trips == trips
            await a.redis.delete(a.keys.secret)  # as if Redis lost it
            other = RedisTaskStore(redis_url, namespace=ns)
            try:
                new = await other.shared_secret()
            finally:
                await other.close()
            assert new != first
            await until_async(
                a.shared_secret, satisfied=lambda got: got == new, what="A adopts the secret"
            )
            tg.cancel_scope.cancel()
    finally:
        await a.close()


async def test_scripts_load_from_package_files_with_matching_sha(
    redis_url: str,
) -> None:
    from mcp_tasks.runtime.stores.redis import scripting

    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    try:
        for script in (scripting.CREATE, scripting.HEARTBEAT, scripting.CLAIM_INPUTS):
            assert script.source.count("local function now_ms()") == 1
            assert await store.redis.script_load(script.source) == script.sha
    finally:
        await store.close()


def test_redis_fixture_fails_under_ci_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from testkit import redis_fixtures

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="redis-server is not installed"):
        redis_fixtures.redis_server_binary()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        redis_fixtures.redis_server_binary()
    assert os.environ.get("CI") is None


async def test_reaper_interrupted_midway_leaves_the_instance_for_the_next(
    redis_url: str,
) -> None:
    from mcp_tasks.runtime.stores.redis import scripting

    ns = unique_namespace()
    dead = RedisTaskStore(redis_url, namespace=ns, lease_s=0.2)
    live = RedisTaskStore(redis_url, namespace=ns, lease_s=0.2)
    try:
        async with anyio.create_task_group() as tg:
            await dead.start(tg)
            await dead.create(record("d1"))
            tg.cancel_scope.cancel()

        async def dead_listed() -> list[str]:  # by Redis's clock, as the reaper sees it
            ids = await live._run.eval(
                scripting.LIST_DEAD,
                [live.keys.instances, live.keys.clock],
                [200, live.instance_id, live.leases._gap_ms],
            )
            return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

        await until_async(
            dead_listed, satisfied=lambda ids: dead.instance_id in ids, what="the lease expires"
        )
        run = live._run
        real_send = run._send

        async def failing_forget(calls: list[scripting.Call]) -> list[Any]:
            if any(script is scripting.FORGET_DEAD for script, _ in calls):
                raise OSError("reaper died here")
            return await real_send(calls)

        run._send = failing_forget  # type: ignore[method-assign]
        with pytest.raises(StoreUnavailable):
            await live.recover(T0 + 5, "lease expired")
        run._send = real_send  # type: ignore[method-assign]
        got = await live.get("d1")
        assert got is not None and got.status == FAILED  # failed before the interruption
        assert dead.instance_id in await live.redis.zrange(live.keys.instances, 0, -1)
        assert await live.recover(T0 + 6, "lease expired") == []  # no second failure
        assert dead.instance_id not in await live.redis.zrange(live.keys.instances, 0, -1)
        assert not await live.redis.exists(live.keys.owned(dead.instance_id))
    finally:
        await dead.close()
        await live.close()


async def test_create_with_a_taken_id_undoes_its_writes_in_one_trip(redis_url: str) -> None:
    """``create`` is one round trip (pointer, task, expiry, lease); an ID already taken, by
    the same or another requestor, raises ``KeyError`` and leaves the first task as it was
    (R-CREATE-2) with no stray key or index entry."""
    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    try:
        await store.create(record("t1", "alice"))
        before = await _keys(store)
        snapshot = {k: await store.redis.dump(k) for k in before}
        trips = store.round_trips
        await store.create(record("t2", "alice"))
        assert store.round_trips == trips + 1
        await store.delete("t2")
        for other in ("alice", "bob"):
            with pytest.raises(KeyError):
                await store.create(record("t1", other))
        assert await _keys(store) == before
        assert {k: await store.redis.dump(k) for k in before} == snapshot
        got = await store.get("t1")
        assert got is not None and got.requestor == "alice"
        assert [t.task_id for t in await store.list_tasks("bob", after=None, limit=10)] == []
    finally:
        await store.close()


async def test_auto_pipelining_shares_round_trips_and_keeps_errors_per_caller(
    redis_url: str,
) -> None:
    """Concurrent calls go out together (fewer pipelines than calls); a reply that is an
    error fails its own caller only, as ``StoreUnavailable`` (R-ERR-1)."""
    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    run = store._run
    try:
        await store.redis.set(f"{store.ns}:text", "not a number")
        sent, failed, ok = run.sent, [], []

        async def bad() -> None:
            try:
                await run.command("INCR", f"{store.ns}:text")
            except StoreUnavailable as exc:
                failed.append(exc)

        async def good(i: int) -> None:
            await store.create(record(f"p{i}"))
            ok.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(good, i)
            tg.start_soon(bad)
        assert len(failed) == 1 and sorted(ok) == list(range(20))
        assert run.sent - sent < 21
        assert len(await store.list_tasks("alice", after=None, limit=50)) == 20
    finally:
        await store.close()


async def test_tasks_stored_before_faces_are_listed_as_the_first_face(redis_url: str) -> None:
    """A task hash written before tasks had a face has no ``f`` field: it is the first
    face's (``REVISION``) when a listing filters by face."""
    store = RedisTaskStore(redis_url, namespace=unique_namespace())
    try:
        await store.create(record("old", created_at=T0))
        await store.create(record("ext", created_at=T0 + 1, face="another-face"))
        await store.create(record("new", created_at=T0 + 2))
        await store.redis.hdel(f"{store.ns}:{{{store.tag('alice')}}}:t:old", "f")
        core = await store.list_tasks("alice", after=None, limit=10, face=REVISION)
        assert [(r.task_id, r.face) for r in core] == [("old", REVISION), ("new", REVISION)]
        ext = await store.list_tasks("alice", after=None, limit=10, face="another-face")
        assert [r.task_id for r in ext] == ["ext"]
    finally:
        await store.close()
