"""How a SELECT names the paths it projects, in every read a SELECT can run as (GetItem, Query, Scan, an index,
BatchExecuteStatement, ExecuteTransaction): a top-level attribute keeps its name; a nested path is returned as an
attribute of its own, named by its last attribute name, or `_N` (its position in the select list) when it ends in a
list index; a path that finds nothing is left out. DynamoDB's naming is not documented: this is the PartiQL
reference implementation's rule, a best guess marked in src/openddb/partiql/naming.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique_name

DOC = {"M": {"inner": {"M": {"deep": {"S": "d"}}}, "alt": {"M": {"deep": {"S": "e"}}},
             "list": {"L": [{"S": "l0"}, {"M": {"k": {"N": "7"}}}]}}}


@pytest.fixture(scope="module")
def docs(ddb: Any) -> str:
    """pk/sk with a global index `byg` on `g` projecting every attribute; two items holding DOC."""
    name = unique_name("pqlproj")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": attribute, "AttributeType": "S"} for attribute in ("pk", "sk", "g")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "byg", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "g", "KeyType": "HASH"}]}])
    for sk in ("a", "b"):
        ddb.put_item(TableName=name, Item={"pk": {"S": "p"}, "sk": {"S": sk}, "g": {"S": "g"}, "doc": DOC,
                                           "top": {"N": "1"}})
    return name


SELECT = 'SELECT top, doc.inner.deep, doc.list[1], doc.list[1].k, doc."missing", doc.list[9] FROM "{}"'
EXPECTED = {"top": {"N": "1"}, "deep": {"S": "d"}, "_3": {"M": {"k": {"N": "7"}}}, "k": {"N": "7"}}


@pytest.mark.parametrize("where", [
    "WHERE pk = 'p' AND sk = 'a'",  # a GetItem
    "WHERE pk = 'p' AND sk <= 'a'",  # a Query
    "WHERE sk = 'a'",  # a Scan
])
def test_nested_paths_are_named_by_their_last_step(ddb, docs, where):
    assert ddb.execute_statement(Statement=f"{SELECT.format(docs)} {where}")["Items"] == [EXPECTED]


def test_an_index_select_names_paths_alike(ddb, docs):
    got = ddb.execute_statement(Statement=f"SELECT sk, doc.inner.deep FROM \"{docs}\".\"byg\" WHERE g = 'g'")
    assert got["Items"] == [{"sk": {"S": "a"}, "deep": {"S": "d"}}, {"sk": {"S": "b"}, "deep": {"S": "d"}}]


def test_top_level_paths_read_as_before_and_nested_ones_cost_the_same(ddb, docs):
    """Top-level attributes only: the item as a ProjectionExpression returns it. A nested SELECT is charged as
    the read of the whole item, as any projection is."""
    one = f"\"{docs}\" WHERE pk = 'p' AND sk = 'a'"
    assert ddb.execute_statement(Statement=f"SELECT top, sk FROM {one}")["Items"] == [
        {"top": {"N": "1"}, "sk": {"S": "a"}}]
    nested = ddb.execute_statement(Statement=f"SELECT doc.inner.deep FROM {one}", ReturnConsumedCapacity="TOTAL")
    native = ddb.get_item(TableName=docs, Key={"pk": {"S": "p"}, "sk": {"S": "a"}}, ReturnConsumedCapacity="TOTAL")
    assert nested["ConsumedCapacity"] == native["ConsumedCapacity"]


def test_two_paths_of_one_name_and_a_path_with_its_parent(ddb, docs):
    """`doc.inner.deep` and `doc.alt.deep` both take `deep` (the later value stays); a path beside its own
    parent, which a ProjectionExpression refuses as overlapping, is returned beside it."""
    one = f"\"{docs}\" WHERE pk = 'p' AND sk = 'a'"
    got = ddb.execute_statement(Statement=f"SELECT doc.inner.deep, doc.alt.deep FROM {one}")["Items"]
    assert got == [{"deep": {"S": "e"}}]
    got = ddb.execute_statement(Statement=f"SELECT doc.inner, doc.inner.deep, doc FROM {one}")["Items"]
    assert got == [{"inner": DOC["M"]["inner"], "deep": {"S": "d"}, "doc": DOC}]


def test_batch_and_transaction_reads_name_paths_alike(ddb, docs):
    statement = f"SELECT doc.list[0], top FROM \"{docs}\" WHERE pk = 'p' AND sk = ?"
    batch = ddb.batch_execute_statement(Statements=[
        {"Statement": statement, "Parameters": [{"S": "a"}]},
        {"Statement": statement, "Parameters": [{"S": "zz"}]}])["Responses"]
    assert batch == [{"TableName": docs, "Item": {"_1": {"S": "l0"}, "top": {"N": "1"}}}, {"TableName": docs}]
    transaction = ddb.execute_transaction(TransactStatements=[
        {"Statement": statement, "Parameters": [{"S": "b"}]},
        {"Statement": f"SELECT doc.none FROM \"{docs}\" WHERE pk = 'p' AND sk = 'a'"}])["Responses"]
    assert transaction == [{"Item": {"_1": {"S": "l0"}, "top": {"N": "1"}}}, {}]


def test_a_quoted_keyword_is_a_path_step(ddb, docs):
    """A keyword after a dot is refused bare ("Invalid path dot component") but is a name in double quotes, as
    in DynamoDB's console (PyDynamoDB issue 28: `payload."size"`)."""
    ddb.update_item(TableName=docs, Key={"pk": {"S": "p"}, "sk": {"S": "b"}}, UpdateExpression="SET m = :m",
                    ExpressionAttributeValues={":m": {"M": {"size": {"N": "2"}}}})
    got = ddb.execute_statement(Statement=f"SELECT m.\"size\" FROM \"{docs}\" WHERE pk = 'p' AND sk = 'b'")
    assert got["Items"] == [{"size": {"N": "2"}}]
