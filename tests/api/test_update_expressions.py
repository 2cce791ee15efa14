"""UpdateExpression through UpdateItem: SET (arithmetic, if_not_exists, list_append, nested paths, list indexes),
REMOVE, ADD, DELETE; pre-update semantics; key protection; ReturnValues; upsert; errors with DynamoDB's wording."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from tests.api.counted import counted

BASE = {
    "n": {"N": "5"}, "s": {"S": "str"}, "l": {"L": [{"S": "0"}, {"S": "1"}, {"S": "2"}]},
    "m": {"M": {"x": {"M": {"y": {"N": "1"}}}}}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]},
}
TYPE_ERROR = "An operand in the update expression has an incorrect data type"
BAD_PATH = "The document path provided in the update expression is invalid for update"
NO_ATTRIBUTE = "The provided expression refers to an attribute that does not exist in the item"


def error_of(excinfo) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


class Item:
    """A fresh copy of BASE under a unique key, with helpers to update and read it."""

    def __init__(self, ddb, table: str) -> None:
        self.ddb, self.table = ddb, table
        self.pk = uuid.uuid4().hex
        self.key = {"pk": {"S": self.pk}}
        ddb.put_item(TableName=table, Item={**self.key, **BASE})

    def update(self, expression: str, values: dict | None = None, names: dict | None = None,
               return_values: str = "NONE", **extra) -> dict | None:
        if values is not None:
            extra["ExpressionAttributeValues"] = values
        if names is not None:
            extra["ExpressionAttributeNames"] = names
        response = self.ddb.update_item(TableName=self.table, Key=self.key, UpdateExpression=expression,
                                        ReturnValues=return_values, **extra)
        return response.get("Attributes")

    def error(self, expression: str, values: dict | None = None, names: dict | None = None) -> tuple[str, str]:
        with pytest.raises(ClientError) as excinfo:
            self.update(expression, values, names)
        assert self.get() == {**self.key, **BASE}, "a rejected update must change nothing"
        return error_of(excinfo)

    def get(self) -> dict:
        return self.ddb.get_item(TableName=self.table, Key=self.key, ConsistentRead=True).get("Item")


@pytest.fixture
def item(ddb, hash_table) -> Item:
    return Item(ddb, hash_table)


def n(value: str) -> dict:
    return {"N": value}


# --- SET ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "values", "expected"), [
    ("SET n = n + :v", {":v": n("1.5")}, n("6.5")),
    ("SET n = n - :v", {":v": n("7")}, n("-2")),
    ("SET n = :v - n", {":v": n("10")}, n("5")),
    ("SET n = :a + :b", {":a": n("0.1"), ":b": n("0.2")}, n("0.3")),
    ("SET n = n + :v", {":v": n("-5")}, n("0")),
])
def test_set_arithmetic(item, expression, values, expected):
    """+ and - are exact decimal arithmetic (0.1 + 0.2 is 0.3) and results are normalized."""
    assert item.update(expression, values, return_values="UPDATED_NEW") == {"n": expected}


def test_set_arithmetic_precision_overflow(item):
    """Arithmetic whose exact result needs more than 38 digits is rejected."""
    assert item.error("SET n = n + :v", {":v": n("9" * 38)}) == \
        ("ValidationException", "Attempting to store more than 38 significant digits in a Number")


def test_set_arithmetic_range_overflow(item):
    """Arithmetic beyond the number range is a Number overflow."""
    big = "9.9999999999999999999999999999999999999E+125"
    assert item.error("SET n = :a + :b", {":a": n(big), ":b": n(big)}) == \
        ("ValidationException", "Number overflow. Attempting to store a number with magnitude larger than supported "
                                "range")


def test_set_arithmetic_on_wrong_types(item):
    """A non-number constant is caught when the expression is compiled; a stored non-number when it runs."""
    assert item.error("SET n = n + :v", {":v": {"S": "1"}}) == \
        ("ValidationException", "1 validation error detected: Invalid UpdateExpression: Incorrect operand type for "
                                "operator or function; "
                                "operator or function: +, operand type: S")
    assert item.error("SET n = s + :v", {":v": n("1")}) == ("ValidationException", TYPE_ERROR)


def test_set_arithmetic_on_missing_attribute(item):
    """Arithmetic on an attribute that does not exist is an error (use if_not_exists)."""
    assert item.error("SET n = nothing + :v", {":v": n("1")}) == ("ValidationException", NO_ATTRIBUTE)


def test_if_not_exists(item):
    """if_not_exists keeps an existing value and supplies the default for a missing one."""
    assert item.update("SET q = if_not_exists(q, :z), n = if_not_exists(n, :z)", {":z": n("0")},
                       return_values="UPDATED_NEW") == {"q": n("0"), "n": n("5")}


def test_if_not_exists_counter(item):
    """The counter idiom: SET c = if_not_exists(c, :zero) + :one."""
    for expected in ("1", "2"):
        assert item.update("SET c = if_not_exists(c, :zero) + :one", {":zero": n("0"), ":one": n("1")},
                           return_values="UPDATED_NEW") == {"c": n(expected)}


@pytest.mark.parametrize(("expression", "expected"), [
    ("SET l = list_append(l, :v)", ["0", "1", "2", "x"]),
    ("SET l = list_append(:v, l)", ["x", "0", "1", "2"]),
    ("SET fresh = list_append(:v, :v)", ["x", "x"]),
])
def test_list_append(item, expression, expected):
    """list_append concatenates two lists in the order given."""
    attrs = item.update(expression, {":v": {"L": [{"S": "x"}]}}, return_values="UPDATED_NEW")
    assert next(iter(attrs.values())) == {"L": [{"S": v} for v in expected]}


def test_list_append_type_errors(item):
    """list_append needs two lists."""
    assert item.error("SET l = list_append(l, :v)", {":v": {"S": "x"}}) == \
        ("ValidationException", "1 validation error detected: Invalid UpdateExpression: Incorrect operand type for "
                                "operator or function; "
                                "operator or function: list_append, operand type: S")
    assert item.error("SET l = list_append(s, :v)", {":v": {"L": []}}) == ("ValidationException", TYPE_ERROR)


def test_set_nested_paths(item):
    """SET reaches into maps and lists; UPDATED_NEW shows the written paths with their structure."""
    attrs = item.update("SET m.x.z = :v, l[1] = :w, #k.#x.y = :w", {":v": {"S": "v"}, ":w": {"S": "w"}},
                        {"#k": "m", "#x": "x"}, return_values="UPDATED_NEW")
    assert attrs == {"m": {"M": {"x": {"M": {"z": {"S": "v"}, "y": {"S": "w"}}}}}, "l": {"L": [{"S": "w"}]}}
    got = item.get()
    assert got["m"] == {"M": {"x": {"M": {"y": {"S": "w"}, "z": {"S": "v"}}}}}
    assert got["l"] == {"L": [{"S": "0"}, {"S": "w"}, {"S": "2"}]}


def _nested(levels: int) -> dict:
    """A value of `levels` nesting levels: maps around a string."""
    value: dict = {"S": "deep"}
    for _ in range(levels - 1):
        value = {"M": {"k": value}}
    return value


def test_update_cannot_build_what_put_item_refuses(item):
    """An item may nest 32 levels and name attributes in less than 64 KB; an update may not go past either,
    even though each of its parts is valid on its own (the result could not be written back by PutItem)."""
    nesting = ("ValidationException", "Nesting Levels have exceeded supported limits: Attributes in the item "
               "have nested levels beyond supported limit")
    assert item.error("SET m.x.z = :v", {":v": _nested(31)}) == nesting  # z is level 3: 33 levels in all
    item.update("SET m.x.z = :v", {":v": _nested(30)})  # 32 levels in all: fine
    assert item.get()["m"]["M"]["x"]["M"]["z"] == _nested(30)
    item.update("REMOVE m.x.z")
    assert item.error("SET l[0] = :v", {":v": _nested(32)}) == nesting
    too_large = ("ValidationException",
                 "1 validation error detected: Attribute name is too large, must be less than 65536 bytes")
    assert item.error("SET #a = :v", {":v": n("1")}, {"#a": "a" * 70000}) == too_large
    # A value holding a map with such a name is answered the same, not as an invalid ExpressionAttributeValues
    # entry (recorded against the service).
    assert item.error("SET doc = :v", {":v": {"M": {"x" * 65536: n("1")}}}) == too_large


def test_set_list_index_beyond_the_end_appends(item):
    """Setting an index past the end of a list appends the value."""
    item.update("SET l[10] = :v", {":v": {"S": "x"}})
    assert item.get()["l"] == {"L": [{"S": "0"}, {"S": "1"}, {"S": "2"}, {"S": "x"}]}


def test_list_indexes_have_an_allowable_range(ddb, item):
    """The highest index a path may name is 4294967294 (measured against DynamoDB); beyond it the expression is
    refused, as a constraint violation, in updates, projections and conditions alike."""
    def refusal(kind: str, index: str) -> tuple[str, str]:
        return ("ValidationException", f"1 validation error detected: Invalid {kind}: List index is not within the "
                                       f"allowable range; index: [{index}]")

    assert item.error("SET l[4294967295] = :v", {":v": {"S": "x"}}) == refusal("UpdateExpression", "4294967295")
    for member, kind in (("ProjectionExpression", "ProjectionExpression"),
                         ("ConditionExpression", "ConditionExpression")):
        text = "l[99999999999999]" if member == "ProjectionExpression" else "attribute_exists(l[99999999999999])"
        with pytest.raises(ClientError) as excinfo:
            if member == "ProjectionExpression":
                ddb.get_item(TableName=item.table, Key=item.key, ProjectionExpression=text)
            else:
                ddb.delete_item(TableName=item.table, Key=item.key, ConditionExpression=text)
        assert error_of(excinfo) == refusal(kind, "99999999999999")
    item.update("SET l[4294967294] = :v", {":v": {"S": "x"}})  # the highest index: far past the end, appended
    assert item.get()["l"]["L"][-1] == {"S": "x"}


@pytest.mark.parametrize("expression", ["SET m.nope.z = :v", "SET s.z = :v", "SET s[0] = :v", "SET m[0] = :v",
                                        "SET nothing.z = :v"])
def test_set_invalid_document_path(item, expression):
    """A path through a missing or non-container attribute is invalid for update."""
    assert item.error(expression, {":v": {"S": "v"}}) == ("ValidationException", BAD_PATH)


def test_set_from_another_attribute(item):
    """SET can copy a (nested) attribute; a missing source is an error."""
    assert item.error("SET c = nothing") == ("ValidationException", NO_ATTRIBUTE)
    assert item.update("SET c = m.x.y", return_values="UPDATED_NEW") == {"c": n("1")}


def test_all_actions_see_the_item_before_the_update(item):
    """Every action reads the pre-update item: a swap works, and arithmetic uses old values."""
    attrs = item.update("SET n = s, s = n, c = n + :one", {":one": n("1")}, return_values="UPDATED_NEW")
    assert attrs == {"n": {"S": "str"}, "s": n("5"), "c": n("6")}


# --- REMOVE ---------------------------------------------------------------------------------------------


def test_remove(item):
    """REMOVE drops attributes and nested members; removing an absent attribute is not an error (removing one
    under an absent map is: see test_expression_edges)."""
    old = item.update("REMOVE s, m.x.y, nothing, m.nope", return_values="UPDATED_OLD")
    assert old == {"s": {"S": "str"}, "m": {"M": {"x": {"M": {"y": n("1")}}}}}
    got = item.get()
    assert "s" not in got
    assert got["m"] == {"M": {"x": {"M": {}}}}


def test_remove_list_elements_use_old_positions(item):
    """Several list indexes in one REMOVE refer to the positions before the update."""
    assert item.update("REMOVE l[0], l[2]", return_values="UPDATED_OLD") == {"l": {"L": [{"S": "0"}, {"S": "2"}]}}
    assert item.get()["l"] == {"L": [{"S": "1"}]}
    item.update("REMOVE l[7]")
    assert item.get()["l"] == {"L": [{"S": "1"}]}


def test_set_and_remove_in_one_list(item):
    """SET of one index and REMOVE of another in the same list both use old positions."""
    item.update("SET l[0] = :v REMOVE l[1]", {":v": {"S": "x"}})
    assert item.get()["l"] == {"L": [{"S": "x"}, {"S": "2"}]}


def test_remove_past_the_end_spares_an_appended_element(item):
    """REMOVE of an index past the list's old end removes nothing, not the element a SET in the same update
    appends there (every action sees the item as it was)."""
    item.update("SET l[5] = :v REMOVE l[3]", {":v": {"S": "x"}})
    assert item.get()["l"] == {"L": [{"S": "0"}, {"S": "1"}, {"S": "2"}, {"S": "x"}]}


# --- ADD and DELETE -------------------------------------------------------------------------------------


def test_add_numbers(item):
    """ADD increments a number, and creates a missing attribute with the operand."""
    assert item.update("ADD n :v, fresh :v", {":v": n("2")}, return_values="UPDATED_NEW") == \
        {"n": n("7"), "fresh": n("2")}


def test_add_set_members(item):
    """ADD unions a set (existing members kept once) and creates a missing set."""
    attrs = item.update("ADD ss :s, fresh :s, ns :n", {":s": {"SS": ["c", "a"]}, ":n": {"NS": ["3"]}},
                        return_values="UPDATED_NEW")
    assert sorted(attrs["ss"]["SS"]) == ["a", "b", "c"]
    assert sorted(attrs["fresh"]["SS"]) == ["a", "c"]
    assert sorted(attrs["ns"]["NS"]) == ["1", "2", "3"]


def test_add_type_errors(item):
    """ADD needs a number or set operand matching the stored attribute."""
    assert item.error("ADD n :v", {":v": {"S": "x"}}) == \
        ("ValidationException", "1 validation error detected: Invalid UpdateExpression: Incorrect operand type for "
                                "operator or function; "
                                "operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND")
    assert item.error("ADD n :v", {":v": {"L": []}}) == \
        ("ValidationException", "1 validation error detected: Invalid UpdateExpression: Incorrect operand type for "
                                "operator or function; "
                                "operator: ADD, operand type: LIST, typeSet: ALLOWED_FOR_ADD_OPERAND")
    assert item.error("ADD s :v", {":v": n("1")}) == ("ValidationException", TYPE_ERROR)
    assert item.error("ADD ss :v", {":v": {"NS": ["1"]}}) == ("ValidationException", TYPE_ERROR)


def test_delete_set_members(item):
    """DELETE removes members (absent ones ignored); an emptied set disappears; a missing attribute is fine."""
    assert item.update("DELETE ss :s", {":s": {"SS": ["a", "zz"]}}, return_values="UPDATED_NEW") == \
        {"ss": {"SS": ["b"]}}
    item.update("DELETE ss :s, nothing :s", {":s": {"SS": ["b"]}})
    assert "ss" not in item.get() and "nothing" not in item.get()


def test_delete_type_errors(item):
    """DELETE needs a set operand of the stored set's type."""
    assert item.error("DELETE ns :v", {":v": n("1")}) == \
        ("ValidationException", "1 validation error detected: Invalid UpdateExpression: Incorrect operand type for "
                                "operator or function; "
                                "operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND")
    assert item.error("DELETE ss :v", {":v": {"NS": ["1"]}}) == ("ValidationException", TYPE_ERROR)


def test_all_four_clauses_together(item):
    """SET, REMOVE, ADD and DELETE combine in one expression, in any clause order."""
    item.update("DELETE ss :a ADD n :one REMOVE s SET c = :one", {":a": {"SS": ["a"]}, ":one": n("1")})
    got = item.get()
    assert got["n"] == n("6") and got["c"] == n("1") and got["ss"] == {"SS": ["b"]} and "s" not in got


# --- keys, upsert, return values ------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "values", "names"), [
    ("SET pk = :v", {":v": {"S": "x"}}, None),
    ("SET #k = :v", {":v": {"S": "x"}}, {"#k": "pk"}),
    ("REMOVE pk", None, None),
    ("ADD pk :v", {":v": {"SS": ["x"]}}, None),
])
def test_key_attributes_cannot_be_updated(item, expression, values, names):
    """Any action on a key attribute is rejected."""
    assert item.error(expression, values, names) == \
        ("ValidationException", "One or more parameter values were invalid: Cannot update attribute pk. "
                                "This attribute is part of the key")


def test_sort_key_cannot_be_updated(ddb, range_table):
    """The sort key is protected too."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=range_table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}},
                        UpdateExpression="SET sk = :v", ExpressionAttributeValues={":v": {"S": "c"}})
    assert error_of(excinfo) == ("ValidationException", "One or more parameter values were invalid: Cannot update "
                                                        "attribute sk. This attribute is part of the key")


def test_update_missing_item_creates_it(ddb, hash_table):
    """UpdateItem is an upsert: the new item has the key plus the written attributes."""
    key = {"pk": {"S": uuid.uuid4().hex}}
    response = ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="SET a = :v ADD c :one",
                               ExpressionAttributeValues={":v": {"S": "x"}, ":one": n("1")}, ReturnValues="ALL_NEW")
    assert response["Attributes"] == {**key, "a": {"S": "x"}, "c": n("1")}
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"] == response["Attributes"]


def test_update_without_expression_creates_key_only_item(ddb, hash_table):
    """An UpdateItem with only a Key creates the key-only item (and leaves an existing one alone)."""
    key = {"pk": {"S": uuid.uuid4().hex}}
    assert ddb.update_item(TableName=hash_table, Key=key, ReturnValues="ALL_NEW")["Attributes"] == key
    ddb.put_item(TableName=hash_table, Item={**key, "a": {"S": "x"}})
    ddb.update_item(TableName=hash_table, Key=key)
    assert ddb.get_item(TableName=hash_table, Key=key)["Item"] == {**key, "a": {"S": "x"}}


def test_only_removals_do_not_create_a_missing_item(ddb, hash_table):
    """REMOVE/DELETE on a missing item do not create it (DynamoDB's one exception to upsert)."""
    key = {"pk": {"S": uuid.uuid4().hex}}
    response = ddb.update_item(TableName=hash_table, Key=key, UpdateExpression="REMOVE a DELETE s :s",
                               ExpressionAttributeValues={":s": {"SS": ["x"]}}, ReturnValues="ALL_NEW")
    assert "Attributes" not in response
    assert "Item" not in ddb.get_item(TableName=hash_table, Key=key)


@pytest.mark.parametrize(("return_values", "expected"), [
    ("NONE", None),
    ("ALL_OLD", {"n": n("5"), "s": {"S": "str"}, "l": BASE["l"], "m": BASE["m"], "ss": BASE["ss"],
                 "ns": BASE["ns"]}),
    ("ALL_NEW", {"n": n("6"), "l": BASE["l"], "m": BASE["m"], "ss": BASE["ss"], "ns": BASE["ns"],
                 "c": {"S": "new"}}),
    ("UPDATED_OLD", {"n": n("5"), "s": {"S": "str"}}),
    ("UPDATED_NEW", {"n": n("6"), "c": {"S": "new"}}),
])
def test_return_values(item, return_values, expected):
    """Each ReturnValues choice: nothing, the whole item before/after, or only the touched attributes."""
    attrs = item.update("SET n = n + :one, c = :c REMOVE s", {":one": n("1"), ":c": {"S": "new"}},
                        return_values=return_values)
    if expected is None:
        assert attrs is None
    else:
        if return_values.startswith("ALL"):
            expected = {**item.key, **expected}
        assert attrs == expected


def test_updated_values_absent_when_nothing_to_show(item, ddb, hash_table):
    """UPDATED_OLD of a new attribute and UPDATED_NEW of a removal have nothing to return: no Attributes."""
    assert item.update("SET brand_new = :v", {":v": n("1")}, return_values="UPDATED_OLD") is None
    assert item.update("REMOVE s", return_values="UPDATED_NEW") is None
    fresh = ddb.update_item(TableName=hash_table, Key={"pk": {"S": uuid.uuid4().hex}}, UpdateExpression="SET a = :v",
                            ExpressionAttributeValues={":v": n("1")}, ReturnValues="ALL_OLD")
    assert "Attributes" not in fresh


def test_condition_failure_changes_nothing(item):
    """A failed ConditionExpression rejects the whole update."""
    with pytest.raises(ClientError) as excinfo:
        item.update("SET n = :v REMOVE s", {":v": n("0"), ":five": n("6")}, ConditionExpression="n = :five")
    assert error_of(excinfo) == ("ConditionalCheckFailedException", "The conditional request failed")
    assert item.get() == {**item.key, **BASE}


def test_condition_and_update_share_placeholders(item):
    """One ExpressionAttributeNames/Values map serves both expressions; use in either counts."""
    item.update("SET #n = #n + :one", {":one": n("1"), ":five": n("5")}, {"#n": "n", "#s": "s"},
                ConditionExpression="#n = :five AND attribute_exists(#s)")
    assert item.get()["n"] == n("6")


# --- expression errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "values", "names", "message"), [
    ("SET n = :v REMOVE n", {":v": n("1")}, None,
     "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these "
     "paths; path one: [n], path two: [n]"),
    ("SET m.x = :v REMOVE m.x.y", {":v": n("1")}, None,
     "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these "
     "paths; path one: [m, x], path two: [m, x, y]"),
    ("SET a = :v SET b = :v", {":v": n("1")}, None,
     'Invalid UpdateExpression: The "SET" section can only be used once in an update expression;'),
    ("SET name = :v", {":v": n("1")}, None,
     "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: name"),
    ("SET a = :nope", {":v": n("1")}, None,
     "Invalid UpdateExpression: An expression attribute value used in expression is not defined; "
     "attribute value: :nope"),
    ("SET #a = :v", {":v": n("1")}, None,
     "Invalid UpdateExpression: An expression attribute name used in the document path is not defined; "
     "attribute name: #a"),
    ("SET a = :v", {":v": n("1"), ":w": n("1")}, None,
     "Value provided in ExpressionAttributeValues unused in expressions: keys: {:w}"),
    ("SET a = :v", {":v": n("1")}, {"#u": "u"},
     "Value provided in ExpressionAttributeNames unused in expressions: keys: {#u}"),
    ("SET a = :v,", {":v": n("1")}, None, 'Invalid UpdateExpression: Syntax error; token: "<EOF>", near: ","'),
    ("SET a :v", {":v": n("1")}, None, 'Invalid UpdateExpression: Syntax error; token: ":v", near: "a :v"'),
    ("FOO a", None, None, 'Invalid UpdateExpression: Syntax error; token: "FOO", near: "FOO a"'),
    ("SET a = size(l)", None, None,
     "Invalid UpdateExpression: The function is not allowed to be used this way in an expression; function: size"),
    ("SET a = if_not_exists(:v, b)", {":v": n("1")}, None,
     "Invalid UpdateExpression: Operator or function requires a document path; operator or function: "
     "if_not_exists"),
    ("SET a = frob(b)", None, None, "Invalid UpdateExpression: Invalid function name; function: frob"),
    ("", None, None, "Invalid UpdateExpression: The expression can not be empty;"),
])
def test_update_expression_errors(item, expression, values, names, message):
    """Malformed update expressions are rejected before anything is written."""
    assert item.error(expression, values, names) == ("ValidationException", counted(message))


def test_values_without_expression(ddb, hash_table):
    """ExpressionAttributeValues without any expression is rejected, naming the null expressions."""
    with pytest.raises(ClientError) as excinfo:
        ddb.update_item(TableName=hash_table, Key={"pk": {"S": "a"}}, ExpressionAttributeValues={":v": n("1")})
    assert error_of(excinfo) == ("ValidationException",
                                 "1 validation error detected: ExpressionAttributeValues can only be specified when "
                                 "using expressions: UpdateExpression and ConditionExpression are null")
