"""Grammar, precedence, validation messages and a print/parse round-trip property."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from openddb.expressions.ast import (
    And,
    Arith,
    Between,
    Call,
    Compare,
    Cond,
    ExpressionError,
    In,
    Not,
    Operand,
    Or,
    Path,
    UpdateAst,
    ValueRef,
)
from openddb.expressions.cache import condition_tree, update_tree
from openddb.expressions.parser import parse_condition, parse_projection, parse_update

A, B, V = Path(("a",)), Path(("b",)), ValueRef(":v")


def test_precedence_and_binds_tighter_than_or() -> None:
    """a OR b AND c parses as a OR (b AND c), per the Developer Guide's precedence list."""
    node = parse_condition("a = :v OR b = :v AND c = :v")
    assert isinstance(node, Or) and isinstance(node.right, And)


def test_not_binds_tighter_than_and() -> None:
    """NOT applies to the next condition only."""
    node = parse_condition("NOT a = :v AND b = :v")
    assert isinstance(node, And) and isinstance(node.left, Not)


def test_parentheses_override_precedence() -> None:
    """(a OR b) AND c keeps the OR inside."""
    node = parse_condition("(a = :v OR b = :v) AND c = :v")
    assert isinstance(node, And) and isinstance(node.left, Or)


def test_paths_between_in_and_functions() -> None:
    """Nested paths, BETWEEN, IN and function calls build the expected nodes."""
    assert parse_condition("a.#b[3].c BETWEEN :x AND :y") == Between(
        Path(("a", "#b", 3, "c")), ValueRef(":x"), ValueRef(":y"))
    assert parse_condition("a IN (:x, b)") == In(A, (ValueRef(":x"), B))
    assert parse_condition("size(a) > :v") == Compare(">", Call("size", (A,)), V)
    assert parse_condition("attribute_exists (a)") == Call("attribute_exists", (A,))


def test_update_clauses_in_any_order() -> None:
    """Clauses may appear in any order; each keeps its actions in source order."""
    node = parse_update("remove x, y[2] set a = b + :v, c = list_append(c, :v) add n :v delete s :v")
    assert node.remove == (Path(("x",)), Path(("y", 2)))
    assert node.set == ((A, Arith("+", B, V)), (Path(("c",)), Call("list_append", (Path(("c",)), V))))
    assert node.add == ((Path(("n",)), V),) and node.delete == ((Path(("s",)), V),)


def test_projection_paths() -> None:
    """A projection is a comma-separated list of paths."""
    assert parse_projection("a, b[1], #c.d") == (A, Path(("b", 1)), Path(("#c", "d")))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("((a = :v))", "The expression has redundant parentheses;"),
        ("size(a)", "The function is not allowed to be used this way in an expression; function: size"),
        ("foo(a)", "Invalid function name; function: foo"),
        ("Size(a) = :v", "Invalid function name; function: Size"),
        ("begins_with(a)", "Incorrect number of operands for operator or function; "
                           "operator or function: begins_with, number of operands: 1"),
        ("attribute_exists(:v)", "Operator or function requires a document path; "
                                 "operator or function: attribute_exists"),
        ("if_not_exists(a, :v)", "The function is not allowed to be used this way in an expression; "
                                 "function: if_not_exists"),
        ("status = :v", "Attribute name is a reserved keyword; reserved keyword: status"),
        ("a.Name = :v", "Attribute name is a reserved keyword; reserved keyword: Name"),
        ("a IN (" + ", ".join([":v"] * 101) + ")",
         "The IN operator is provided with too many operands; number of operands: 101"),
        (".".join(["a"] * 33) + " = :v", "The document path has too many nesting levels; nesting levels: 33"),
    ],
)
def test_condition_validation_messages(text: str, message: str) -> None:
    """Each semantic rule raises DynamoDB's message (without the 'Invalid <Kind>: ' prefix)."""
    with pytest.raises(ExpressionError) as info:
        condition_tree(text)
    assert info.value.message == message


def test_in_accepts_exactly_100_operands() -> None:
    """100 IN operands is the documented maximum, not an error."""
    condition_tree("a IN (" + ", ".join([":v"] * 100) + ")")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SET a = :v SET b = :v", 'The "SET" section can only be used once in an update expression;'),
        ("REMOVE a REMOVE b", 'The "REMOVE" section can only be used once in an update expression;'),
        ("SET a = if_not_exists(:v, :v)", "Operator or function requires a document path; "
                                          "operator or function: if_not_exists"),
        ("SET a = size(b)", "The function is not allowed to be used this way in an expression; function: size"),
        ("SET a = list_append(a)", "Incorrect number of operands for operator or function; "
                                   "operator or function: list_append, number of operands: 1"),
        ("REMOVE count", "Attribute name is a reserved keyword; reserved keyword: count"),
    ],
)
def test_update_validation_messages(text: str, message: str) -> None:
    """UpdateExpression-specific rules raise DynamoDB's messages."""
    with pytest.raises(ExpressionError) as info:
        update_tree(text)
    assert info.value.message == message


def test_update_operator_limit() -> None:
    """More than 300 operators/functions in one UpdateExpression is rejected (documented quota)."""
    ok = "SET " + ", ".join(f"a{i} = :v + :v" for i in range(300))
    update_tree(ok)
    with pytest.raises(ExpressionError):
        update_tree(ok + ", z = :v + :v")


def test_cache_returns_same_tree() -> None:
    """Each distinct expression string is parsed once."""
    assert condition_tree("a = :cached") is condition_tree("a = :cached")
    assert isinstance(update_tree("SET a = :v"), UpdateAst)


# --- round-trip property -----------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c1", "x_1", "#n", "#m"])
paths = st.builds(
    lambda head, rest: Path((head, *rest)),
    names,
    st.lists(st.one_of(names, st.integers(0, 20)), max_size=3),
)
values = st.sampled_from([":v", ":w", ":x1"]).map(ValueRef)
operands: st.SearchStrategy[Operand] = st.one_of(paths, values, paths.map(lambda p: Call("size", (p,))))


def conds(children: st.SearchStrategy[Cond]) -> st.SearchStrategy[Cond]:
    return st.one_of(
        st.builds(And, children, children),
        st.builds(Or, children, children),
        st.builds(Not, children),
    )


leaves: st.SearchStrategy[Cond] = st.one_of(
    st.builds(Compare, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), operands, operands),
    st.builds(Between, operands, operands, operands),
    st.builds(In, operands, st.lists(operands, min_size=1, max_size=4).map(tuple)),
    st.builds(lambda p: Call("attribute_exists", (p,)), paths),
    st.builds(lambda p, v: Call("begins_with", (p, v)), paths, values),
)
trees = st.recursive(leaves, conds, max_leaves=8)


def show_operand(node: Operand) -> str:
    if isinstance(node, Path):
        out = ""
        for el in node.elements:
            out += f"[{el}]" if isinstance(el, int) else ("." if out else "") + el
        return out
    if isinstance(node, ValueRef):
        return node.name
    assert isinstance(node, Call)
    return f"{node.name}({', '.join(show_operand(a) for a in node.args)})"


def show(node: Cond) -> str:
    # Every compound child is parenthesised once, so the text never has redundant parentheses.
    if isinstance(node, (And, Or)):
        word = "AND" if isinstance(node, And) else "or"
        return f"({show(node.left)}) {word} ({show(node.right)})"
    if isinstance(node, Not):
        return f"NOT ({show(node.operand)})"
    if isinstance(node, Compare):
        return f"{show_operand(node.left)} {node.op} {show_operand(node.right)}"
    if isinstance(node, Between):
        return f"{show_operand(node.operand)} between {show_operand(node.low)} AND {show_operand(node.high)}"
    if isinstance(node, In):
        return f"{show_operand(node.operand)} IN ({', '.join(show_operand(c) for c in node.choices)})"
    return show_operand(node)


@given(trees)
def test_printed_tree_parses_back_to_itself(tree: Cond) -> None:
    """Any well-formed condition tree, printed as text, parses back to the same tree."""
    assert parse_condition(show(tree)) == tree


TOKENS = ["a", "#n", ":v", "size", "begins_with", "list_append", "if_not_exists", "(", ")", "[", "]", "0", ",",
          ".", "=", "<>", "<", ">=", "+", "-", "AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD",
          "DELETE", "#", ":", "!"]


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(TOKENS), max_size=8))
@example(["a", "=", "("])
@example(["SET", "a", "=", "("])
def test_any_token_soup_parses_or_raises_expression_error(tokens: list[str]) -> None:
    """Whatever the text, every expression kind either yields a tree or raises ExpressionError (a 400),
    never another exception (which would be a 500)."""
    text = " ".join(tokens)
    for tree_of in (condition_tree, update_tree, parse_projection):
        try:
            tree_of(text)
        except ExpressionError:
            pass
