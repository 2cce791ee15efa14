"""The Ion text reader and writer of exports and imports (api/backups_ion.py): the text forms Ion allows for the
values of DynamoDB's mapping, the values out of it (an error of their record), text that is not Ion, and the
decimals written in the Developer Guide's form with their exact digits."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest

from openddb.api.backups_ion import IonSyntaxError, decimal_text, item_line, records


def items(text: str) -> list[object]:
    return [record.item if record.error is None else record.error for record in records(text)]


def test_the_text_forms_of_the_mapping():
    text = r"""$ion_1_0 /* a comment */ {'Item' : {  // another
        "s": "\x41\u00e9\U0001F600\ud83d\ude00\"\\\/\0\t", l:'''long ''' '''string''', e:"",
        n1: 1_000.5, n2: -0d-3, n3: 12D+2, n4: 7, set: $dynamodb_NS :: [1., 2d1,], b: {{ aG k= }},
        'quoted name': null.null, t: true, f: false, m: {}, list: [[], {x: null}],
    },}"""
    assert items(text) == [{
        "s": {"S": "Aé😀😀\"\\/\0\t"}, "l": {"S": "long string"}, "e": {"S": ""}, "n1": {"N": "1000.5"},
        "n2": {"N": "-0E-3"}, "n3": {"N": "12E+2"}, "n4": {"N": "7"}, "set": {"NS": ["1", "2E1"]},
        "b": {"B": "aGk="}, "quoted name": {"NULL": True}, "t": {"BOOL": True}, "f": {"BOOL": False},
        "m": {"M": {}}, "list": {"L": [{"L": []}, {"M": {"x": {"NULL": True}}}]}}]


@pytest.mark.parametrize("value", ["1e0", "nan", "+inf", "2007-01-01T", "abc", "'sym'", "{{\"clob\"}}",
                                   "null.string", "0x1F", "other::1", "$dynamodb_SS::[1.]", "$dynamodb_BS::\"x\""])
def test_values_out_of_the_mapping_are_errors_of_their_record(value):
    found = items(f'{{Item:{{v:{value}}}}} {{Item:{{v:1.}}}}')
    assert isinstance(found[0], str) and found[0].startswith("Unsupported Ion value")
    assert found[1] == {"v": {"N": "1"}}


def test_records_that_are_no_items():
    assert items('{Item:1.} {Other:{}} {Item:{}, More:1} [{Item:{a:"x"}}, 5] {Item:{a:1, a:2}}') == [
        "The Ion value is not an item: {Item:{...}} expected"] * 3 + [
        {"a": {"S": "x"}}, "The Ion value is not an item: {Item:{...}} expected",
        "Unsupported Ion value: the field 'a' named twice"]


@pytest.mark.parametrize(("text", "incomplete"), [
    ('{Item:{a:"x" b:1}}', False), ("{Item:{a:(1)}}", False), ('{Item:{a:"x\ny"}}', False),
    ("{Item:{a:\"\\q\"}}", False), ("{Item:{a:1}}}", False), ("{Item:{a:{{!}}}}", False), ("{Item:{null:1}}", False),
    ("{Item:{a:\"x\"", True),
    ("[{Item:{}}", True), ("{Item:{a:'''x", True), ("/* open", True), ('{Item:{a:"\\ud800"}}', False)])
def test_text_that_is_not_ion(text, incomplete):
    with pytest.raises(IonSyntaxError) as raised:
        list(records(text))
    assert raised.value.incomplete is incomplete


@pytest.mark.parametrize(("number", "text"), [
    ("103", "103."), ("600", "6d2"), ("2000", "2d3"), ("0", "0."), ("-7", "-7."), ("1.5", "1.5"),
    ("0.000001", "0.000001"), ("0.0000001", "1d-7"), ("-0.000123", "-0.000123"), ("9.9E+125", "99d124"),
    ("12345678901234567890123456789012345678", "12345678901234567890123456789012345678."),
    ("1E-130", "1d-130"), ("1000.01", "1000.01")])
def test_decimals_in_the_guides_form(number, text):
    assert decimal_text(number) == text
    line = item_line(orjson.dumps({"n": {"N": number}})).decode()
    assert line == f"$ion_1_0 {{Item:{{n:{text}}}}}\n"
    (read,) = items(line)
    assert Decimal(read["n"]["N"]) == Decimal(number)  # type: ignore[index]
