"""A write conflict at the end of a pass runs again only the requests of the group that failed.

One worker's pass: a write joins the optimistic group, a control-plane call commits that group in the middle
of the pass (DDL commits the open group first), a second write starts a new group, and another worker (a
second engine on the same store) changes the row the second write read before the pass ends. The second group
fails its check and its request runs again; the first, already committed, keeps its answer: running it again
would apply an acknowledged write twice.
"""

from __future__ import annotations

import asyncio
import json

from openddb.api.dispatch import Dispatcher
from openddb.api.incoming import Frame
from openddb.storage.sqlite import SQLiteEngine
from tests.api.test_protocol import AUTH, framed_request
from tests.unit.serving import connect, dispatcher_with_table, receive

TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/tbl"


def _add(key: str) -> bytes:
    return framed_request("UpdateItem", {
        "TableName": "tbl", "Key": {"pk": {"S": key}}, "UpdateExpression": "ADD c :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}}, "ReturnValues": "UPDATED_NEW"})


def _stored(engine: SQLiteEngine, dispatcher: Dispatcher, key: str) -> str:
    _, payload = dispatcher.handle(Frame(b"DynamoDB_20120810.GetItem", AUTH.encode(), json.dumps(
        {"TableName": "tbl", "Key": {"pk": {"S": key}}, "ConsistentRead": True}).encode(), False, b"r"))
    engine.end_reads()
    return str(json.loads(payload)["Item"]["c"]["N"])


def test_conflict_reruns_only_the_failed_group(tmp_path) -> None:
    async def scenario() -> tuple[list[bytes], str, str]:
        engine = SQLiteEngine(str(tmp_path), group_commit=True, shared_reads=True)
        engine.session.optimistic, engine.session.wait = True, False
        dispatcher = dispatcher_with_table(engine)
        other = SQLiteEngine(str(tmp_path))  # another worker on the same store
        other_dispatcher = Dispatcher(other)
        clients, protocols = await connect(dispatcher, 3)
        try:
            # One pass (no await in between): write, DDL, write, then the other worker's change.
            protocols[0].data_received(_add("first"))
            protocols[1].data_received(framed_request("TagResource", {
                "ResourceArn": TABLE_ARN, "Tags": [{"Key": "k", "Value": "v"}]}))
            protocols[2].data_received(_add("second"))
            status, _ = other_dispatcher.handle(Frame(b"DynamoDB_20120810.PutItem", AUTH.encode(), json.dumps(
                {"TableName": "tbl", "Item": {"pk": {"S": "second"}, "c": {"N": "10"}}}).encode(), False, b"r"))
            assert status == 200
            answers = [b"", b"", b""]
            for _ in range(200):
                await asyncio.sleep(0.005)
                receive(clients, answers)
                if all(b"\r\n\r\n{" in a for a in answers):
                    break
            return answers, _stored(engine, dispatcher, "first"), _stored(engine, dispatcher, "second")
        finally:
            for client in clients:
                client.close()
            other.close()
            engine.close()

    answers, first, second = asyncio.run(scenario())
    assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in answers), answers
    assert b'"c":{"N":"1"}' in answers[0]
    assert first == "1"  # applied once, as acknowledged
    assert b'"c":{"N":"11"}' in answers[2] and second == "11"  # ran again on the other worker's row
