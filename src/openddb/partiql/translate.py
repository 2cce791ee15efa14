"""PartiQL conditions, values and SET/REMOVE clauses written in DynamoDB's expression language, with every name
and value behind a placeholder, so the one expression compiler and evaluator serve PartiQL too (no second
evaluator of conditions or updates)."""

from __future__ import annotations

from typing import Any

from openddb.errors import ValidationException
from openddb.model import AttributeValue
from openddb.model.values import type_of, validate_value
from openddb.partiql import ast
from openddb.partiql.lexer import malformed

_SCALAR_SETS = {"S": "SS", "N": "NS", "B": "BS"}
_CONDITION_FUNCTIONS = frozenset({"begins_with", "contains", "attribute_type"})


class Placeholders:
    """The ExpressionAttributeNames of the expressions written for one statement, and the value expressions behind
    their value placeholders: the texts do not depend on the parameters, so one statement's expressions are
    written (and compiled) once, and only the values are bound per request (`bound`)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.nodes: dict[str, ast.Expr] = {}
        self._refs: dict[str, str] = {}

    def name(self, attribute: str) -> str:
        ref = self._refs.get(attribute)
        if ref is None:
            ref = self._refs[attribute] = f"#{len(self._refs)}"
            self.names[ref] = attribute
        return ref

    def value(self, node: ast.Expr) -> str:
        ref = f":{len(self.nodes)}"
        self.nodes[ref] = node
        return ref

    def bound(self, parameters: list[AttributeValue]) -> dict[str, AttributeValue]:
        """ExpressionAttributeValues for these parameters."""
        return {ref: bind(node, parameters) for ref, node in self.nodes.items()}

    def path(self, path: ast.Path) -> str:
        text = self.name(str(path.steps[0]))
        for step in path.steps[1:]:
            text += f"[{step}]" if isinstance(step, int) else "." + self.name(step)
        return text

    def members(self) -> dict[str, Any]:
        """The ExpressionAttributeNames member these placeholders fill, if any (DynamoDB refuses an empty map)."""
        return {"ExpressionAttributeNames": self.names} if self.names else {}


def bind(node: ast.Expr, parameters: list[AttributeValue]) -> AttributeValue:
    """A value expression's attribute value (a literal, a parameter, or a list, map or set of them)."""
    if isinstance(node, ast.Value):
        return node.value
    if isinstance(node, ast.Param):
        return parameters[node.index]
    if isinstance(node, ast.ListOf):
        return {"L": [bind(item, parameters) for item in node.items]}
    if isinstance(node, ast.MapOf):
        return {"M": {key: bind(value, parameters) for key, value in node.entries}}
    if isinstance(node, ast.SetOf):
        return _set_of([bind(item, parameters) for item in node.items])
    raise malformed("Unexpected path")  # best guess: a path where a value must be


def _set_of(members: list[AttributeValue]) -> AttributeValue:
    kinds = {type_of(member) for member in members}
    if len(kinds) != 1 or next(iter(kinds)) not in _SCALAR_SETS:
        # best guess at DynamoDB's wording for an empty or mixed set literal
        raise ValidationException("Unsupported type passed: a set must hold members of one type: string, number "
                                  "or binary")
    kind = next(iter(kinds))
    value = {_SCALAR_SETS[kind]: [member[kind] for member in members]}
    return validate_value(value)  # refuses duplicates in DynamoDB's words


def operand(node: ast.Expr, refs: Placeholders) -> str:
    if isinstance(node, ast.Path):
        return refs.path(node)
    if isinstance(node, ast.Call):
        if node.name == "size" and len(node.args) == 1 and isinstance(node.args[0], ast.Path):
            return f"size({refs.path(node.args[0])})"
        raise malformed(f"Unexpected function {node.name}")  # best guess
    if isinstance(node, ast.Arith):
        return f"{operand(node.left, refs)} {node.op} {operand(node.right, refs)}"
    return refs.value(node)


def condition(node: ast.Expr, refs: Placeholders) -> str:
    """A WHERE clause (or one of its conjuncts) as a condition expression."""
    if isinstance(node, ast.And):
        return f"({condition(node.left, refs)} AND {condition(node.right, refs)})"
    if isinstance(node, ast.Or):
        return f"({condition(node.left, refs)} OR {condition(node.right, refs)})"
    if isinstance(node, ast.Not):
        return f"(NOT {condition(node.operand, refs)})"
    if isinstance(node, ast.Compare):
        return f"{operand(node.left, refs)} {node.op} {operand(node.right, refs)}"
    if isinstance(node, ast.Between):
        return f"{operand(node.operand, refs)} BETWEEN {operand(node.low, refs)} AND {operand(node.high, refs)}"
    if isinstance(node, ast.In):
        return f"{operand(node.operand, refs)} IN ({', '.join(operand(o, refs) for o in node.options)})"
    if isinstance(node, ast.Is):
        if node.kind == "MISSING":
            function = "attribute_exists" if node.negated else "attribute_not_exists"
            return f"{function}({refs.path(node.path)})"
        # IS NULL: an attribute of DynamoDB's NULL type. best guess: whether DynamoDB also counts a missing
        # attribute as NULL, as the PartiQL specification does, is not recorded; here it does not.
        test = f"attribute_type({refs.path(node.path)}, {refs.value(ast.Value({'S': 'NULL'}))})"
        return f"(NOT {test})" if node.negated else test
    if isinstance(node, ast.Call) and node.name in _CONDITION_FUNCTIONS and len(node.args) == 2 and \
            isinstance(node.args[0], ast.Path):
        second = node.args[1]
        if node.name == "attribute_type":
            return f"attribute_type({refs.path(node.args[0])}, {refs.value(second)})"
        return f"{node.name}({refs.path(node.args[0])}, {operand(second, refs)})"
    raise malformed("Unexpected condition")  # best guess: DynamoDB's detail is not recorded


def update_text(sets: tuple[tuple[ast.Path, ast.Expr], ...], removes: tuple[ast.Path, ...],
                refs: Placeholders) -> str:
    """An UPDATE's SET and REMOVE clauses as an update expression: `set_add` and `set_delete` become ADD and
    DELETE actions, `list_append` and `if_not_exists` stay functions, + and - stay arithmetic."""
    assignments: list[str] = []
    adds: list[str] = []
    deletes: list[str] = []
    for target, value in sets:
        path = refs.path(target)
        if isinstance(value, ast.Call) and value.name in ("set_add", "set_delete"):
            if len(value.args) != 2 or value.args[0] != target:
                raise malformed(f"Unexpected arguments to {value.name}")  # best guess
            (adds if value.name == "set_add" else deletes).append(f"{path} {operand(value.args[1], refs)}")
        else:
            assignments.append(f"{path} = {_assigned(value, refs)}")
    clauses = []
    if assignments:
        clauses.append("SET " + ", ".join(assignments))
    if removes:
        clauses.append("REMOVE " + ", ".join(refs.path(path) for path in removes))
    if adds:
        clauses.append("ADD " + ", ".join(adds))
    if deletes:
        clauses.append("DELETE " + ", ".join(deletes))
    return " ".join(clauses)


def _assigned(node: ast.Expr, refs: Placeholders) -> str:
    if isinstance(node, ast.Call) and node.name in ("list_append", "if_not_exists") and len(node.args) == 2:
        return f"{node.name}({_assigned(node.args[0], refs)}, {_assigned(node.args[1], refs)})"
    if isinstance(node, ast.Arith):
        return f"{_assigned(node.left, refs)} {node.op} {_assigned(node.right, refs)}"
    return operand(node, refs)
