"""The TTL sweep (api/ttl.py) on every engine: what it deletes, how it moves through a table, what it keeps.

Only each test's own table is checked: other tables of a shared store are swept too. The sweeps here run at a
made-up time without the sweep's lease (servers sharing a PostgreSQL store may hold it meanwhile)."""

from __future__ import annotations

import copy

from openddb.api import ttl
from openddb.model import Item
from openddb.storage.base import HASH_SPACE, Engine, StorageKey, WriteOp
from tests.storage.test_engine_contract import new_meta

NOW = 1_800_000_000.0


def stored(engine: Engine, meta) -> set[bytes]:  # type: ignore[no-untyped-def]
    keys = {row.key.sk for row in engine.scan(meta, 0, HASH_SPACE, None)}
    engine.end_reads()
    return keys


def ttl_table(engine: Engine, expires: dict[bytes, Item]):  # type: ignore[no-untyped-def]
    """A table with TTL on `exp` holding one item per sort key, with the given `exp` values ({} for none)."""
    meta = engine.create_table(new_meta())
    meta = copy.deepcopy(meta)
    meta.ttl_attribute = "exp"
    engine.update_table(meta)
    ops = []
    for n, (sk, value) in enumerate(expires.items()):
        item: Item = {"pk": {"S": "p"}, "sk": {"S": sk.decode()}}
        if value:
            item["exp"] = value
        ops.append(WriteOp(meta, StorageKey(n, b"p", sk), lambda old, item=item: item))
    engine.write(ops)
    engine.commit()
    return engine.get_table(meta.name)


def test_sweep_deletes_only_expired_items(engine: Engine) -> None:
    meta = ttl_table(engine, {
        b"past": {"N": str(int(NOW) - 1)},
        b"fraction": {"N": "1799999999.999"},
        b"now": {"N": str(int(NOW))},  # expires when the time is *past* it
        b"future": {"N": str(int(NOW) + 1)},
        b"too-old": {"N": str(int(NOW) - ttl.IGNORED_AGE - 1)},
        b"oldest-counted": {"N": str(int(NOW) - ttl.IGNORED_AGE)},
        b"string": {"S": "1"},
        b"none": {},
    })
    ttl.sweep(engine, NOW, lease=False)
    assert stored(engine, meta) == {b"now", b"future", b"too-old", b"string", b"none"}


def test_sweep_moves_through_a_table_in_chunks(engine: Engine) -> None:
    expires = {b"k%02d" % i: {"N": str(int(NOW) - 10 if i % 3 else int(NOW) + 60)} for i in range(25)}
    meta = ttl_table(engine, expires)
    kept = {b"k%02d" % i for i in range(0, 25, 3)}
    ttl.sweep(engine, NOW, rows=10, lease=False)  # the first ten rows (in partition-hash order: k00-k09)
    assert stored(engine, meta) == kept | {b"k%02d" % i for i in range(10, 25) if i % 3}
    ttl.sweep(engine, NOW, rows=10, lease=False)
    ttl.sweep(engine, NOW, rows=10, lease=False)
    assert stored(engine, meta) == kept


def test_an_item_that_no_longer_qualifies_is_kept(engine: Engine) -> None:
    """The delete checks the item as it stands when written: a TTL moved into the future meanwhile saves it."""
    meta = ttl_table(engine, {b"a": {"N": str(int(NOW) - 10)}})
    apply = ttl._expire("exp", NOW)
    renewed: Item = {"pk": {"S": "p"}, "sk": {"S": "a"}, "exp": {"N": str(int(NOW) + 60)}}
    assert apply(renewed) is renewed
    assert apply(None) is None
    assert stored(engine, meta) == {b"a"}


def test_sweep_skips_tables_without_ttl(engine: Engine) -> None:
    meta = engine.create_table(new_meta())
    engine.write([WriteOp(meta, StorageKey(1, b"p", b"x"),
                          lambda old: {"pk": {"S": "p"}, "sk": {"S": "x"}, "exp": {"N": "1"}})])
    engine.commit()
    ttl.sweep(engine, NOW, lease=False)
    assert stored(engine, meta) == {b"x"}


def test_background_duty_leaves_no_read_snapshot(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The server's once-a-second duty reads the catalog; on an idle server a snapshot left open would hold back
    the WAL checkpoints indefinitely."""
    from openddb.api.dispatch import Dispatcher
    from openddb.storage.sqlite import SQLiteEngine

    engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
    try:
        engine.create_table(new_meta())
        Dispatcher(engine).run_background()
        assert not engine.reading
    finally:
        engine.close()
