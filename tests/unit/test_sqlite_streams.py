"""The parameters a stream record is written with (sqlite_streams)."""

from __future__ import annotations

import pytest

from openddb.model.schema import StreamViewType
from openddb.storage.sqlite_streams import _record

# What Python's sqlite3 binds without its adaptation protocol (which costs ~0.5 µs a value: see `_ABSENT_IMAGE`).
_BOUND_DIRECTLY = (int, float, str, bytearray)


@pytest.mark.parametrize("view", ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"])
@pytest.mark.parametrize(("before", "new"), [((0, None), b'{"k":{"S":"a"}}'),  # INSERT
                                             ((15, b'{"k":{"S":"a"}}'), b'{"k":{"S":"b"}}'),  # MODIFY
                                             ((15, b'{"k":{"S":"a"}}'), None)])  # REMOVE
def test_a_queued_record_binds_no_value_sqlite3_must_adapt(view: StreamViewType, before: tuple[int, bytes | None],
                                                           new: bytes | None) -> None:
    params = _record(view, 1.5, "user", before, new, 0 if new is None else 15, 1, 2)
    assert [type(value).__name__ for value in params if not isinstance(value, _BOUND_DIRECTLY)] == []
