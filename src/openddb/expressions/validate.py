"""Checks on a parsed tree that need no placeholder values: function names and arity, where each function
may appear, reserved words, path depth, and the IN / operator-count limits.

They run once per distinct expression string (the result is cached with the tree), in source order, so the
first problem in the text is the one reported.
"""

from __future__ import annotations

from .ast import (
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
from .reserved import RESERVED_WORDS

MAX_PATH_DEPTH = 32
MAX_IN_OPERANDS = 100
MAX_OPERATORS = 300  # operators and functions in any one expression

# function name -> number of operands
CONDITION_FUNCTIONS = {
    "attribute_exists": 1,
    "attribute_not_exists": 1,
    "attribute_type": 2,
    "begins_with": 2,
    "contains": 2,
}
OPERAND_FUNCTIONS = {"size": 1}  # usable as a comparison operand in conditions
UPDATE_FUNCTIONS = {"if_not_exists": 2, "list_append": 2}  # usable in SET values
ALL_FUNCTIONS = {**CONDITION_FUNCTIONS, **OPERAND_FUNCTIONS, **UPDATE_FUNCTIONS}
# functions whose first operand must be a document path (attribute_type's may be a value too: the Developer Guide's
# `attribute_type (path, type)` aside, DynamoDB accepts `attribute_type(:v, :t)` and answers it from the value).
_PATH_FIRST = frozenset({"attribute_exists", "attribute_not_exists", "if_not_exists"})
# What DynamoDB names as the operand type when attribute_type's type operand is a document path, whose type is not
# known when the expression is parsed: every type its evaluator has, its internal ones included. Best guess: the
# text as quoted from real responses in public emulator recordings (2026), not found in AWS's own documents.
_ANY_TYPE = "{S,SS,N,NS,B,BS,BOOL,NULL,L,M,HD,DOUBLE,FLOAT,HDS,FS,DOUBLESET,DICT,DECIMAL,INT,DECIMALSET,INTSET}"
NOT_THIS_WAY = "The function is not allowed to be used this way in an expression; function: {}"


def check_path(path: Path) -> None:
    """Reserved words among the bare names, and the nesting limit."""
    for el in path.elements:
        if type(el) is str and el[0] != "#" and el.upper() in RESERVED_WORDS:
            raise ExpressionError(f"Attribute name is a reserved keyword; reserved keyword: {el}")
    if len(path.elements) > MAX_PATH_DEPTH:
        raise ExpressionError(
            f"The document path has too many nesting levels; nesting levels: {len(path.elements)}"
        )


def _check_call(call: Call, allowed: dict[str, int]) -> None:
    name = call.name
    if name not in ALL_FUNCTIONS:
        raise ExpressionError(f"Invalid function name; function: {name}")
    if name not in allowed:
        raise ExpressionError(NOT_THIS_WAY.format(name))
    if len(call.args) != allowed[name]:
        raise ExpressionError(
            "Incorrect number of operands for operator or function; "
            f"operator or function: {name}, number of operands: {len(call.args)}"
        )
    if name in _PATH_FIRST and not isinstance(call.args[0], Path):
        raise ExpressionError(
            f"Operator or function requires a document path; operator or function: {name}"
        )


def _check_plain_operand(node: Operand) -> None:
    """A function argument in a condition: a path or a value, never another call."""
    if isinstance(node, Path):
        check_path(node)
    elif isinstance(node, Call):
        _check_call(node, {})


def _check_comparison_operand(node: Operand) -> None:
    if isinstance(node, Path):
        check_path(node)
    elif isinstance(node, Call):
        _check_call(node, OPERAND_FUNCTIONS)
        for arg in node.args:
            if isinstance(arg, Call) and arg.name == "size" and node.name == "size":
                _check_call(arg, OPERAND_FUNCTIONS)
                # size(size(x)): the inner size is a number, which size does not take.
                raise ExpressionError("Incorrect operand type for operator or function; "
                                      "operator or function: size, operand type: N")
            _check_plain_operand(arg)


def check_condition(node: Cond, limited: bool = True) -> None:
    """Validate a Condition/Filter/KeyCondition tree; raises ExpressionError. `limited`: hold it to the operator
    limit (not when it was written from legacy conditions, which have no such limit)."""
    _check_condition(node)
    operators = _condition_operators(node) if limited else 0
    if operators > MAX_OPERATORS:
        raise ExpressionError(f"The expression contains too many operators; operator count: {operators}")


def _condition_operators(node: Cond | Operand) -> int:
    """How many operators and functions a condition uses (NOT, comparisons, BETWEEN, IN, calls). AND and OR do
    not count: DynamoDB refuses `a<b and (a<b and (...))` once it holds more than 300 `<`, with "operator
    count: 301" (observed against it, scylladb issue 14473)."""
    if isinstance(node, (And, Or)):
        return _condition_operators(node.left) + _condition_operators(node.right)
    if isinstance(node, Not):
        return 1 + _condition_operators(node.operand)
    if isinstance(node, Compare):
        return 1 + _condition_operators(node.left) + _condition_operators(node.right)
    if isinstance(node, Between):
        return 1 + sum(_condition_operators(side) for side in (node.operand, node.low, node.high))
    if isinstance(node, In):
        return 1 + _condition_operators(node.operand) + sum(_condition_operators(c) for c in node.choices)
    if isinstance(node, Call):
        return 1 + sum(_condition_operators(arg) for arg in node.args)
    return 0


def _check_condition(node: Cond) -> None:
    if isinstance(node, (And, Or)):
        _check_condition(node.left)
        _check_condition(node.right)
    elif isinstance(node, Not):
        _check_condition(node.operand)
    elif isinstance(node, Compare):
        _check_comparison_operand(node.left)
        _check_comparison_operand(node.right)
    elif isinstance(node, Between):
        _check_comparison_operand(node.operand)
        _check_comparison_operand(node.low)
        _check_comparison_operand(node.high)
    elif isinstance(node, In):
        _check_comparison_operand(node.operand)
        if len(node.choices) > MAX_IN_OPERANDS:
            raise ExpressionError(
                "The IN operator is provided with too many operands; "
                f"number of operands: {len(node.choices)}"
            )
        for choice in node.choices:
            _check_comparison_operand(choice)
    else:
        _check_call(node, CONDITION_FUNCTIONS)
        for arg in node.args:
            _check_plain_operand(arg)
        if node.name == "attribute_type":
            _check_type_operand(node.args[1])


def _check_type_operand(node: Operand) -> None:
    """attribute_type's second operand names a type, so it must be a value placeholder (whose value, an S naming
    one of the ten types, is checked once the values are known). A path is refused when the expression is parsed,
    before any item is read: a Query refuses it even when no item matches."""
    if not isinstance(node, ValueRef):
        raise ExpressionError("Incorrect operand type for operator or function; "
                              f"operator or function: attribute_type, operand type: {_ANY_TYPE}")


def _check_set_value(node: Operand) -> int:
    """Validate a SET value; returns how many operators and functions it uses."""
    if isinstance(node, Path):
        check_path(node)
        return 0
    if isinstance(node, ValueRef):
        return 0
    if isinstance(node, Arith):
        return 1 + _check_set_value(node.left) + _check_set_value(node.right)
    _check_call(node, UPDATE_FUNCTIONS)
    if node.name == "list_append" and any(isinstance(arg, Call) and arg.name == "list_append" for arg in node.args):
        # list_append(list_append(a, :v), :w): DynamoDB refuses the inner call (the statement of DynamoDB's
        # behaviour; the text is the family's "not allowed this way", naming the function). if_not_exists inside
        # list_append, the usual way to append to a list that may be missing, stays allowed.
        raise ExpressionError(NOT_THIS_WAY.format("list_append"))
    return 1 + sum(_check_set_value(arg) for arg in node.args)


def check_update(node: UpdateAst, limited: bool = True) -> None:
    """Validate an UpdateExpression tree; raises ExpressionError. `limited`: as for `check_condition`."""
    operators = 0
    for target, value in node.set:
        check_path(target)
        operators += _check_set_value(value)
    for target in node.remove:
        check_path(target)
    for target, _ in node.add:
        check_path(target)
    for target, _ in node.delete:
        check_path(target)
    if limited and operators > MAX_OPERATORS:
        raise ExpressionError(
            f"The expression contains too many operators; operator count: {operators}"
        )


def check_projection(paths: tuple[Path, ...]) -> None:
    """Validate a ProjectionExpression's paths; raises ExpressionError."""
    for path in paths:
        check_path(path)
