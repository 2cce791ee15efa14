"""PartiQL's ExecuteStatement through boto3: every statement form, function, literal type and error implemented,
each checked against the same data read or written with the native operations."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.conftest import create_table, unique_name

MALFORMED = "Statement wasn't well formed, can't be processed: "


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def run(ddb, statement: str, *parameters: dict, **options) -> dict:
    if parameters:
        options["Parameters"] = list(parameters)
    return ddb.execute_statement(Statement=statement, **options)


def refused(ddb, statement: str, *parameters: dict, **options) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        run(ddb, statement, *parameters, **options)
    return error_of(excinfo)


@pytest.fixture(scope="module")
def table(ddb) -> str:
    """pk S / sk N, three partitions of four items, each with a few typed attributes."""
    name = create_table(ddb, unique_name("pql"), range_type="N")
    for p in range(3):
        for s in range(4):
            ddb.put_item(TableName=name, Item={
                "pk": {"S": f"p{p}"}, "sk": {"N": str(s)}, "n": {"N": str(p * 10 + s)},
                "tag": {"S": f"tag-{s}"}, "tags": {"SS": ["a", f"b{s}"]},
                "doc": {"M": {"inner": {"L": [{"S": "x"}, {"N": str(s)}]}}},
                **({"odd": {"BOOL": True}} if s % 2 else {}),
            })
    return name


def keys_of(items: list[dict]) -> list[tuple[str, str]]:
    return sorted((item["pk"]["S"], item["sk"]["N"]) for item in items)


# --- SELECT ---------------------------------------------------------------------------------------------


def test_select_full_key_is_the_item(ddb, table):
    """A SELECT fixing the whole key reads that item, as GetItem does (and answers [] when there is none)."""
    got = run(ddb, f'SELECT * FROM "{table}" WHERE pk = ? AND sk = ?', {"S": "p1"}, {"N": "2"})
    native = ddb.get_item(TableName=table, Key={"pk": {"S": "p1"}, "sk": {"N": "2"}})["Item"]
    assert got["Items"] == [native]
    assert run(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'p1' AND sk = 99")["Items"] == []


def test_select_partition_is_a_query(ddb, table):
    """A WHERE fixing the partition key reads that partition in key order, like the equivalent Query, and is
    charged as it."""
    got = run(ddb, f'SELECT * FROM "{table}" WHERE pk = ?', {"S": "p2"}, ReturnConsumedCapacity="TOTAL")
    native = ddb.query(TableName=table, KeyConditionExpression="pk = :p",
                       ExpressionAttributeValues={":p": {"S": "p2"}}, ReturnConsumedCapacity="TOTAL")
    assert got["Items"] == native["Items"]
    assert got["ConsumedCapacity"] == native["ConsumedCapacity"]


def test_select_sort_key_range_and_order(ddb, table):
    """Sort-key conditions narrow the Query (comparison, BETWEEN); ORDER BY ... DESC reads it backwards."""
    got = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'p0' AND sk BETWEEN 1 AND 2")
    assert got["Items"] == [{"sk": {"N": "1"}}, {"sk": {"N": "2"}}]
    got = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'p0' AND sk >= 2 ORDER BY sk DESC")
    assert got["Items"] == [{"sk": {"N": "3"}}, {"sk": {"N": "2"}}]


def test_select_without_the_partition_key_scans(ddb, table):
    """Without an equality on the partition key the table is scanned with the WHERE as its filter."""
    got = run(ddb, f'SELECT * FROM "{table}" WHERE n > ? AND sk < 2', {"N": "5"})
    assert keys_of(got["Items"]) == [("p1", "0"), ("p1", "1"), ("p2", "0"), ("p2", "1")]


def test_select_partitions_by_in_or_or(ddb, table):
    """A partition key fixed by IN or by OR of equalities reads each partition by a Query, in the order named, each
    partition once; charged as those Queries; paged across partitions by Limit and NextToken."""
    native = [ddb.query(TableName=table, KeyConditionExpression="pk = :p", ReturnConsumedCapacity="TOTAL",
                        ExpressionAttributeValues={":p": {"S": p}}) for p in ("p2", "p0")]
    expected = native[0]["Items"] + native[1]["Items"]
    for where in ("pk IN ['p2', 'p0', 'p2']", "pk = 'p2' OR pk = 'p0'", "(pk = ? OR pk = 'p0')"):
        parameters = [{"S": "p2"}] if "?" in where else []
        got = run(ddb, f'SELECT * FROM "{table}" WHERE {where}', *parameters, ReturnConsumedCapacity="TOTAL")
        assert got["Items"] == expected
        assert got["ConsumedCapacity"]["CapacityUnits"] == sum(q["ConsumedCapacity"]["CapacityUnits"] for q in native)
    got = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk IN ['p2', 'p0'] AND sk > 1")
    assert [(item["sk"]["N"]) for item in got["Items"]] == ["2", "3", "2", "3"]
    seen, token, pages = [], None, 0
    while True:
        page = run(ddb, f"SELECT * FROM \"{table}\" WHERE pk IN ['p2', 'p0']", Limit=3,
                   **({"NextToken": token} if token else {}))
        seen.extend(page["Items"])
        pages += 1
        token = page.get("NextToken")
        if token is None:
            break
    assert seen == expected and pages >= 3


def test_select_of_several_partitions_pages_by_ten(ddb, table):
    """"Results are returned in pages of up to 10 items" for an IN on the partition key, which takes at most 50
    values (Developer Guide, PartiQL operators)."""
    statement = f"SELECT * FROM \"{table}\" WHERE pk IN ['p0', 'p1', 'p2']"
    first = run(ddb, statement)
    assert len(first["Items"]) == 10 and "NextToken" in first
    second = run(ddb, statement, NextToken=first["NextToken"])
    assert "NextToken" not in second
    assert keys_of(first["Items"] + second["Items"]) == keys_of(ddb.scan(TableName=table)["Items"])
    values = ", ".join(f"'k{i}'" for i in range(51))
    assert refused(ddb, f'SELECT * FROM "{table}" WHERE pk IN [{values}]')[0] == "ValidationException"


def test_is_null(ddb):
    """IS [NOT] NULL tests an attribute's type, as IS [NOT] MISSING tests its presence."""
    name = create_table(ddb, unique_name("pqlnull"), range_type=None)
    for pk, value in (("n", {"NULL": True}), ("s", {"S": "x"})):
        ddb.put_item(TableName=name, Item={"pk": {"S": pk}, "a": value})
    ddb.put_item(TableName=name, Item={"pk": {"S": "missing"}})
    assert [i["pk"]["S"] for i in run(ddb, f'SELECT pk FROM "{name}" WHERE a IS NULL')["Items"]] == ["n"]
    assert sorted(i["pk"]["S"] for i in run(ddb, f'SELECT pk FROM "{name}" WHERE a IS NOT NULL')["Items"]) == [
        "missing", "s"]


@pytest.mark.parametrize(("where", "expected"), [
    ("begins_with(tag, 'tag-1')", [("p0", "1")]),
    ("contains(tags, 'b2')", [("p0", "2")]),
    ("size(tags) = 2 AND sk = 3", [("p0", "3")]),
    ("attribute_type(odd, 'BOOL')", [("p0", "1"), ("p0", "3")]),
    ("odd IS MISSING", [("p0", "0"), ("p0", "2")]),
    ("odd IS NOT MISSING", [("p0", "1"), ("p0", "3")]),
    ("n IN [1, 3, 99]", [("p0", "1"), ("p0", "3")]),
    ("NOT (sk < 3)", [("p0", "3")]),
    ("(sk = 0 OR sk = 3) AND tag <> 'tag-3'", [("p0", "0")]),
    ("sk <> 1 AND n >= 2", [("p0", "2"), ("p0", "3")]),
    ("doc.inner[1] = 2", [("p0", "2")]),
])
def test_select_where_functions_and_operators(ddb, table, where, expected):
    """Each WHERE function and operator, on one partition (the conditions beside the key become the filter)."""
    got = run(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'p0' AND ({where})")
    assert keys_of(got["Items"]) == expected


def test_select_projection_paths(ddb, table):
    """A projection list of paths into maps and lists, names quoted or bare: a nested path is returned as an
    attribute of its own (its last name, or `_N` for one ending in a list index; see test_partiql_projection)."""
    got = run(ddb, f"SELECT \"tag\", doc.inner[0] FROM \"{table}\" WHERE pk = 'p0' AND sk = 1")
    assert got["Items"] == [{"tag": {"S": "tag-1"}, "_2": {"S": "x"}}]


def test_select_pages_with_next_token(ddb, table):
    """Limit bounds the items evaluated per page; NextToken resumes, to the same items as one read."""
    statement = f'SELECT * FROM "{table}"'
    seen: list[dict] = []
    token = None
    pages = 0
    while True:
        page = run(ddb, statement, Limit=5, **({"NextToken": token} if token else {}))
        assert len(page["Items"]) <= 5
        seen.extend(page["Items"])
        pages += 1
        token = page.get("NextToken")
        if token is None:
            break
    assert pages >= 3
    assert keys_of(seen) == keys_of(ddb.scan(TableName=table)["Items"])


def test_next_token_of_another_statement_is_refused(ddb, table):
    page = run(ddb, f'SELECT * FROM "{table}"', Limit=1)
    code, _ = refused(ddb, f"SELECT * FROM \"{table}\" WHERE n > 0", NextToken=page["NextToken"])
    assert code == "ValidationException"


# --- INSERT, UPDATE, DELETE -----------------------------------------------------------------------------


def test_insert_every_literal_type(ddb):
    """INSERT of a map literal holding every literal form: string, number, boolean, NULL, list, map, sets, and
    parameters of the types no literal spells (binary, binary set)."""
    name = create_table(ddb, unique_name("pqlins"), range_type=None)
    run(ddb, f"INSERT INTO \"{name}\" VALUE {{'pk': 'a', 's': 'it''s', 'n': -1.50, 'e': 1E3, 't': true, "
             f"'f': FALSE, 'z': NULL, 'l': [1, 'x', [true]], 'm': {{'k': {{'deep': 2}}}}, 'ss': <<'x', 'y'>>, "
             f"'ns': <<3, 1>>, 'b': ?, 'bs': ?}}", {"B": b"\x01"}, {"BS": [b"\x02", b"\x03"]})
    item = ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})["Item"]
    assert item["s"] == {"S": "it's"}
    assert item["n"] == {"N": "-1.5"}
    assert item["e"] == {"N": "1000"}
    assert item["t"] == {"BOOL": True} and item["f"] == {"BOOL": False}
    assert item["z"] == {"NULL": True}
    assert item["l"] == {"L": [{"N": "1"}, {"S": "x"}, {"L": [{"BOOL": True}]}]}
    assert item["m"] == {"M": {"k": {"M": {"deep": {"N": "2"}}}}}
    assert sorted(item["ss"]["SS"]) == ["x", "y"] and sorted(item["ns"]["NS"]) == ["1", "3"]
    assert item["b"] == {"B": b"\x01"} and sorted(item["bs"]["BS"]) == [b"\x02", b"\x03"]


def test_insert_onto_an_existing_key_is_a_duplicate(ddb, table):
    assert refused(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 'p0', 'sk': 0, 'n': 999}}") == (
        "DuplicateItemException", "Duplicate primary key exists in table")
    item = ddb.get_item(TableName=table, Key={"pk": {"S": "p0"}, "sk": {"N": "0"}})["Item"]
    assert item["n"] == {"N": "0"}  # unchanged


def test_update_set_remove_and_functions(ddb):
    """UPDATE with SET (a path, arithmetic, list_append, set_add, set_delete) and REMOVE, matching UpdateItem."""
    name = create_table(ddb, unique_name("pqlupd"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}, "l": {"L": [{"N": "1"}]},
                                       "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2"]}, "gone": {"S": "g"},
                                       "m": {"M": {}}})
    got = run(ddb, f"UPDATE \"{name}\" SET n = n + 2 SET l = list_append(l, [2]) SET ss = set_add(ss, <<'z'>>) "
                   f"SET ns = set_delete(ns, <<1>>), m.k = ? REMOVE gone WHERE pk = 'a' RETURNING ALL NEW *",
              {"S": "v"})
    item = ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})["Item"]
    assert got["Items"] == [item]
    assert item["n"] == {"N": "3"}
    assert item["l"] == {"L": [{"N": "1"}, {"N": "2"}]}
    assert sorted(item["ss"]["SS"]) == ["x", "y", "z"]
    assert item["ns"] == {"NS": ["2"]}
    assert item["m"] == {"M": {"k": {"S": "v"}}}
    assert "gone" not in item


def test_update_conditions(ddb):
    """A WHERE beyond the key is a condition: false, ConditionalCheckFailedException and nothing changes (with
    the old item when ReturnValuesOnConditionCheckFailure asks); an UPDATE of a missing item creates nothing."""
    name = create_table(ddb, unique_name("pqlcond"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    with pytest.raises(ClientError) as excinfo:
        run(ddb, f"UPDATE \"{name}\" SET n = 5 WHERE pk = 'a' AND n > 3",
            ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert error_of(excinfo)[0] == "ConditionalCheckFailedException"
    assert excinfo.value.response["Item"] == {"pk": {"S": "a"}, "n": {"N": "1"}}
    code, _ = refused(ddb, f"UPDATE \"{name}\" SET n = 5 WHERE pk = 'missing'")
    assert code == "ConditionalCheckFailedException"
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "missing"}})
    got = run(ddb, f"UPDATE \"{name}\" SET n = 7 WHERE pk = 'a' AND n = 1 RETURNING MODIFIED OLD *")
    assert got["Items"] == [{"n": {"N": "1"}}]
    # a parenthesized OR beside the key (written into the condition without a second, "redundant" pair)
    got = run(ddb, f"UPDATE \"{name}\" SET n = 8 WHERE pk = 'a' AND (n = 6 OR n = 7) RETURNING ALL NEW *")
    assert got["Items"] == [{"pk": {"S": "a"}, "n": {"N": "8"}}]


def test_delete_and_returning(ddb):
    name = create_table(ddb, unique_name("pqldel"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    code, _ = refused(ddb, f"DELETE FROM \"{name}\" WHERE pk = 'a' AND n = 2")
    assert code == "ConditionalCheckFailedException"
    got = run(ddb, f"DELETE FROM \"{name}\" WHERE pk = ? RETURNING ALL OLD *", {"S": "a"},
              ReturnConsumedCapacity="TOTAL")
    assert got["Items"] == [{"pk": {"S": "a"}, "n": {"N": "1"}}]
    assert got["ConsumedCapacity"] == {"TableName": name, "CapacityUnits": 1.0}
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})
    assert run(ddb, f"DELETE FROM \"{name}\" WHERE pk = 'a'")["Items"] == []  # nothing there: a no-op
    # with a condition too: "SUCCESS is returned with 0 items deleted" (the condition weighs an item that is there)
    assert run(ddb, f"DELETE FROM \"{name}\" WHERE pk = 'a' AND n = 2 RETURNING ALL OLD *")["Items"] == []
    assert run(ddb, f"DELETE FROM \"{name}\" WHERE pk = 'a' AND (n = 2 OR n = 3)")["Items"] == []
    # DELETE returns the old item only
    code, message = refused(ddb, f"DELETE FROM \"{name}\" WHERE pk = 'a' RETURNING ALL NEW *")
    assert code == "ValidationException" and message.startswith(MALFORMED)


# --- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("statement", "detail"), [
    ("EXPLAIN SELECT * FROM t", "Expected data manipulation"),
    ("SELECT * FROM WHERE", "Unexpected keyword"),
    ("SELECT payload.value FROM t", "Invalid path dot component"),  # a keyword after a dot, unquoted
    ("SELECT payload.size FROM t WHERE pk = 'foo'", "Invalid path dot component"),  # (as recorded)
])
def test_malformed_statements(ddb, statement, detail):
    assert refused(ddb, statement) == ("ValidationException", MALFORMED + detail)


def test_parameter_count_must_match(ddb, table):
    code, message = refused(ddb, f'SELECT * FROM "{table}" WHERE pk = ?')
    assert code == "ValidationException" and "parameters" in message
    code, _ = refused(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'p0'", {"S": "extra"})
    assert code == "ValidationException"


def test_order_by_needs_the_partition_key(ddb, table):
    """ORDER BY orders one partition's items: a SELECT that would scan cannot have one; and it names a key
    attribute ("A hash key or a sort key"), not another."""
    code, message = refused(ddb, f'SELECT * FROM "{table}" WHERE n > 1 ORDER BY sk')
    assert code == "ValidationException" and "ORDER BY" in message
    code, message = refused(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'p0' ORDER BY n DESC")
    assert code == "ValidationException" and "ORDER BY" in message
    got = run(ddb, f"SELECT sk FROM \"{table}\" WHERE pk = 'p0' ORDER BY pk, sk DESC")
    assert [item["sk"]["N"] for item in got["Items"]] == ["3", "2", "1", "0"]


def test_missing_table_and_index(ddb, table):
    assert refused(ddb, 'SELECT * FROM "no_such_table_pql"')[0] == "ResourceNotFoundException"
    assert refused(ddb, f'SELECT * FROM "{table}"."no_index"') == (
        "ValidationException", "The table does not have the specified index")
    # the index is looked up before ConsistentRead is weighed
    assert refused(ddb, f'SELECT * FROM "{table}"."no_index"', ConsistentRead=True) == (
        "ValidationException", "The table does not have the specified index")


def test_index_reads_and_consistent_read(ddb):
    """A global index refuses a strongly consistent SELECT in DynamoDB's PartiQL words (not Query's); a local one
    reads it; BatchExecuteStatement reads no index (that statement's ValidationError)."""
    name = unique_name("pqlidx")
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "g", "l")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "byg", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}]}],
        LocalSecondaryIndexes=[{"IndexName": "byl", "Projection": {"ProjectionType": "ALL"}, "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "l", "KeyType": "RANGE"}]}])
    item = {"pk": {"S": "a"}, "sk": {"S": "1"}, "g": {"S": "x"}, "l": {"S": "y"}}
    ddb.put_item(TableName=name, Item=item)
    for where in (" WHERE g = 'x'", ""):
        assert refused(ddb, f'SELECT * FROM "{name}"."byg"{where}', ConsistentRead=True) == (
            "ValidationException", "Strongly consistent read is not supported on Global Secondary Indexes")
        assert run(ddb, f'SELECT * FROM "{name}"."byg"{where}')["Items"] == [item]
    assert run(ddb, f"SELECT * FROM \"{name}\".\"byl\" WHERE pk = 'a'", ConsistentRead=True)["Items"] == [item]
    [answer] = ddb.batch_execute_statement(Statements=[
        {"Statement": f"SELECT * FROM \"{name}\".\"byl\" WHERE pk = 'a' AND l = 'y'"}])["Responses"]
    assert answer["Error"]["Code"] == "ValidationError" and "BatchExecuteStatement" in answer["Error"]["Message"]


def test_writes_need_the_whole_key(ddb, table):
    code, message = refused(ddb, f"UPDATE \"{table}\" SET n = 1 WHERE pk = 'p0'")
    assert (code, message) == ("ValidationException",
                               "Where clause does not contain a mandatory equality on all key attributes")
    assert refused(ddb, f"DELETE FROM \"{table}\" WHERE n = 1")[0] == "ValidationException"


def test_key_of_the_wrong_type(ddb, table):
    assert refused(ddb, f"SELECT * FROM \"{table}\" WHERE pk = 'p0' AND sk = 'x'") == (
        "ValidationException", "The provided key element does not match the schema")
    assert refused(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 1, 'sk': 1}}")[0] == "ValidationException"


# --- ExecuteTransaction ---------------------------------------------------------------------------------


def test_transaction_writes_atomically(ddb):
    """INSERT, UPDATE and DELETE in one transaction: all applied, charged as TransactWriteItems is."""
    name = create_table(ddb, unique_name("pqltx"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "u"}, "n": {"N": "1"}})
    ddb.put_item(TableName=name, Item={"pk": {"S": "d"}})
    got = ddb.execute_transaction(TransactStatements=[
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': ?, 'n': 1}}", "Parameters": [{"S": "i"}]},
        {"Statement": f"UPDATE \"{name}\" SET n = n + 1 WHERE pk = 'u'"},
        {"Statement": f"DELETE FROM \"{name}\" WHERE pk = 'd'"},
    ], ReturnConsumedCapacity="TOTAL")
    assert got["ConsumedCapacity"] == [{"TableName": name, "CapacityUnits": 6.0, "WriteCapacityUnits": 6.0}]
    items = {item["pk"]["S"]: item for item in ddb.scan(TableName=name)["Items"]}
    assert set(items) == {"i", "u"} and items["u"]["n"] == {"N": "2"}


def test_transaction_cancelled_changes_nothing(ddb):
    """One failing statement cancels all: reasons in order, DuplicateItem for an INSERT onto an existing key,
    ConditionalCheckFailed (with the item, when asked) for a false condition; nothing is written."""
    name = create_table(ddb, unique_name("pqltxc"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=[
            {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'new'}}"},
            {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'a'}}"},
            {"Statement": f"UPDATE \"{name}\" SET n = 2 WHERE pk = 'x' AND n = 5"},
        ])
    assert error_of(excinfo)[0] == "TransactionCanceledException"
    reasons = excinfo.value.response["CancellationReasons"]
    assert [reason["Code"] for reason in reasons] == ["None", "DuplicateItem", "ConditionalCheckFailed"]
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "new"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=[{
            "Statement": f"UPDATE \"{name}\" SET n = 2 WHERE pk = 'a' AND n = 5",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}])
    assert excinfo.value.response["CancellationReasons"][0]["Item"] == {"pk": {"S": "a"}, "n": {"N": "1"}}


def test_transaction_token_is_idempotent(ddb):
    """A repeated ClientRequestToken with the same statements writes once; with others it is refused."""
    name = create_table(ddb, unique_name("pqltok"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "0"}})
    statements = [{"Statement": f"UPDATE \"{name}\" SET n = n + 1 WHERE pk = 'a'"}]
    token = name  # unique: tokens outlive a test run on a shared store
    for _ in range(2):
        ddb.execute_transaction(TransactStatements=statements, ClientRequestToken=token)
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "a"}})["Item"]["n"] == {"N": "1"}
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=statements * 1 + [
            {"Statement": f"DELETE FROM \"{name}\" WHERE pk = 'b'"}], ClientRequestToken=token)
    assert error_of(excinfo)[0] == "IdempotentParameterMismatchException"


def test_transaction_of_reads(ddb, table):
    """SELECTs of one item each, read together, charged as TransactGetItems; a read of more is refused, and so is
    a mix of reads and writes."""
    got = ddb.execute_transaction(TransactStatements=[
        {"Statement": f"SELECT n FROM \"{table}\" WHERE pk = 'p0' AND sk = 1"},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p9' AND sk = 1"},
    ], ReturnConsumedCapacity="TOTAL")
    assert got["Responses"] == [{"Item": {"n": {"N": "1"}}}, {}]
    assert got["ConsumedCapacity"][0]["CapacityUnits"] == 4.0
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=[{"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p0'"}])
    assert error_of(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=[
            {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p0' AND sk = 1"},
            {"Statement": f"DELETE FROM \"{table}\" WHERE pk = 'p9' AND sk = 1"}])
    assert error_of(excinfo)[0] == "ValidationException"


# --- BatchExecuteStatement ------------------------------------------------------------------------------


def test_batch_of_writes_answers_each(ddb):
    """Each statement runs on its own: the failing ones carry their Error, the others are written."""
    name = create_table(ddb, unique_name("pqlbw"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    got = ddb.batch_execute_statement(Statements=[
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'b'}}"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'a'}}"},
        {"Statement": f"UPDATE \"{name}\" SET n = 9 WHERE pk = 'a' AND n = 5",
         "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
        {"Statement": f"DELETE FROM \"{name}\" WHERE pk = ?", "Parameters": [{"S": "a"}]},
        {"Statement": "DELETE FROM \"no_such_table_pql\" WHERE pk = 'a'"},
    ])["Responses"]
    assert got[0] == {"TableName": name}
    assert got[1]["Error"]["Code"] == "DuplicateItem"
    assert got[2]["Error"]["Code"] == "ConditionalCheckFailed"
    assert got[2]["Error"]["Item"] == {"pk": {"S": "a"}, "n": {"N": "1"}}
    assert got[3] == {"TableName": name}
    assert got[4]["Error"]["Code"] == "ResourceNotFound"
    assert sorted(item["pk"]["S"] for item in ddb.scan(TableName=name)["Items"]) == ["b"]


def test_batch_of_reads(ddb, table):
    got = ddb.batch_execute_statement(Statements=[
        {"Statement": f"SELECT n FROM \"{table}\" WHERE pk = ? AND sk = ?", "Parameters": [{"S": "p1"}, {"N": "1"}]},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p9' AND sk = 1"},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p1'"},
        {"Statement": "SELEKT"},
    ], ReturnConsumedCapacity="TOTAL")
    responses = got["Responses"]
    assert responses[0] == {"TableName": table, "Item": {"n": {"N": "11"}}}
    assert responses[1] == {"TableName": table}
    assert responses[2]["Error"]["Code"] == "ValidationError"
    assert responses[3]["Error"] == {"Code": "ValidationError", "Message": MALFORMED + "Expected data manipulation"}
    assert got["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 1.0}]


def test_batch_limits(ddb, table):
    statement = {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'p1' AND sk = 1"}
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_execute_statement(Statements=[statement] * 26)
    assert error_of(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        ddb.batch_execute_statement(Statements=[
            statement, {"Statement": f"DELETE FROM \"{table}\" WHERE pk = 'p9' AND sk = 1"}])
    assert error_of(excinfo)[0] == "ValidationException"


def test_transaction_exists_is_a_condition_check(ddb):
    """EXISTS(SELECT ...) on a whole key checks the item is there (and meets the rest of the WHERE) without
    writing it; false, it cancels the transaction. Outside a transaction it is refused."""
    name = create_table(ddb, unique_name("pqlex"), range_type=None)
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    ddb.execute_transaction(TransactStatements=[
        {"Statement": f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'a' AND n = 1)"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'b'}}"}])
    assert "Item" in ddb.get_item(TableName=name, Key={"pk": {"S": "b"}})
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=[
            {"Statement": f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'zz')"},
            {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'c'}}"}])
    assert [r["Code"] for r in excinfo.value.response["CancellationReasons"]] == ["ConditionalCheckFailed", "None"]
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "c"}})
    assert refused(ddb, f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'a')")[0] == "ValidationException"


def test_transaction_exists_with_conditions_beyond_the_key(ddb):
    """EXISTS(SELECT * ... WHERE <whole key> AND <conditions>) is a ConditionCheck with a condition expression
    ("The SELECT statement must specify a full primary key and one other condition", Developer Guide): comparisons,
    functions and IS MISSING; false on an existing item, the transaction is cancelled with ConditionalCheckFailed
    (the item with it when ReturnValuesOnConditionCheckFailure asks) and nothing is written; charged as
    TransactWriteItems charges a ConditionCheck."""
    name = create_table(ddb, unique_name("pqlexc"), range_type="N")
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"N": "1"}, "n": {"N": "5"}, "s": {"S": "abc"}})
    exists = f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'a' AND sk = 1 AND "
    for sk, condition in enumerate(("n > 3", "n BETWEEN ? AND 9", "begins_with(s, 'ab') AND gone IS MISSING",
                                    "attribute_type(s, 'S') OR n = 0", "NOT (n IN [1, 2])", "size(s) = 3")):
        parameters = {"Parameters": [{"N": "4"}]} if "?" in condition else {}
        ddb.execute_transaction(TransactStatements=[
            {"Statement": f"{exists}({condition}))", **parameters},
            {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'b', 'sk': ?}}", "Parameters": [{"N": str(sk)}]}])
    assert len(ddb.query(TableName=name, KeyConditionExpression="pk = :b",
                         ExpressionAttributeValues={":b": {"S": "b"}})["Items"]) == 6
    for condition in ("n > 5", "s = 'abd'", "gone IS NOT MISSING", "contains(s, 'z')"):
        with pytest.raises(ClientError) as excinfo:
            ddb.execute_transaction(TransactStatements=[
                {"Statement": f"{exists}({condition}))", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
                {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'c', 'sk': 1}}"}])
        reasons = excinfo.value.response["CancellationReasons"]
        assert reasons[0] == {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
                              "Item": ddb.get_item(TableName=name, Key={"pk": {"S": "a"}, "sk": {"N": "1"}})["Item"]}
        assert reasons[1] == {"Code": "None"}
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "c"}, "sk": {"N": "1"}})
    got = ddb.execute_transaction(TransactStatements=[
        {"Statement": exists + "n = 5)"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'd', 'sk': 1}}"}], ReturnConsumedCapacity="TOTAL")
    native = ddb.transact_write_items(TransactItems=[
        {"ConditionCheck": {"TableName": name, "Key": {"pk": {"S": "a"}, "sk": {"N": "1"}},
                            "ConditionExpression": "n = :five", "ExpressionAttributeValues": {":five": {"N": "5"}}}},
        {"Put": {"TableName": name, "Item": {"pk": {"S": "e"}, "sk": {"N": "1"}}}}], ReturnConsumedCapacity="TOTAL")
    assert got["ConsumedCapacity"] == native["ConsumedCapacity"]
    code, _ = error_of_transaction(ddb, [{"Statement": f"EXISTS(SELECT * FROM \"{name}\" WHERE pk = 'a' AND n = 5)"},
                                         {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'f', 'sk': 1}}"}])
    assert code == "ValidationException"  # a key attribute left open
    code, message = error_of_transaction(ddb, [
        {"Statement": f"EXISTS(SELECT * FROM \"{name}\".\"byn\" WHERE pk = 'a' AND sk = 1)"},
        {"Statement": f"INSERT INTO \"{name}\" VALUE {{'pk': 'f', 'sk': 1}}"}])
    assert code == "ValidationException" and "EXISTS" in message  # an index has no primary key to check


def error_of_transaction(ddb, statements: list[dict]) -> tuple[str, str]:
    with pytest.raises(ClientError) as excinfo:
        ddb.execute_transaction(TransactStatements=statements)
    return error_of(excinfo)
