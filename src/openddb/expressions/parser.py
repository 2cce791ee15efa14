"""Recursive-descent parser: one grammar for condition, filter, key condition, projection and update.

Parsing is purely syntactic (DynamoDB reports a syntax error anywhere in the text before any other problem);
``validate.py`` then checks function names, arity, reserved words and limits on the finished tree.
Precedence, lowest first: OR, AND, NOT, parentheses, then comparisons / BETWEEN / IN / function calls.
"""

from __future__ import annotations

import sys

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
    PathElement,
    UpdateAst,
    ValueRef,
)
from .lexer import EOF, INTEGER, KEYWORD, NAME, NAME_REF, OP, VALUE_REF, Token, syntax_error, tokenize

COMPARATORS = frozenset({"=", "<>", "<", "<=", ">", ">="})
# The highest list index a document path may name (measured against DynamoDB: 4294967295 is refused).
MAX_LIST_INDEX = 4_294_967_294

# An expression of up to 4 KB may nest some 2,000 parentheses, four parser frames each (and the checks after
# parsing walk the tree as deep): far past Python's default limit of 1,000 frames, which would turn a client's
# deep expression into a RecursionError (a 500) instead of DynamoDB's answer. Python 3.11+ calls between Python
# functions without growing the C stack, so the higher limit is safe.
_DEEPEST_EXPRESSION_FRAMES = 20_000
if sys.getrecursionlimit() < _DEEPEST_EXPRESSION_FRAMES:
    sys.setrecursionlimit(_DEEPEST_EXPRESSION_FRAMES)
_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")


class _Parser:
    __slots__ = ("closing", "pos", "text", "tokens")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[Token] = tokenize(text)
        self.pos = 0
        # open-paren token index -> matching close-paren index, for the redundant-parentheses rule.
        self.closing: dict[int, int] = {}

    # --- token helpers ---------------------------------------------------------------------------

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def fail(self) -> ExpressionError:
        return syntax_error(self.text, self.tokens, self.pos)

    def is_op(self, value: str) -> bool:
        tok = self.tokens[self.pos]
        return tok.kind == OP and tok.value == value

    def is_keyword(self, value: str) -> bool:
        tok = self.tokens[self.pos]
        return tok.kind == KEYWORD and tok.value == value

    def expect_op(self, value: str) -> None:
        if not self.is_op(value):
            raise self.fail()
        self.pos += 1

    def expect_end(self) -> None:
        if self.tokens[self.pos].kind != EOF:
            raise self.fail()

    # --- document paths and operands -------------------------------------------------------------

    def path(self) -> Path:
        tok = self.peek()
        if tok.kind not in (NAME, NAME_REF):
            raise self.fail()
        self.pos += 1
        elements: list[PathElement] = [tok.value]
        while True:
            if self.is_op("."):
                self.pos += 1
                tok = self.peek()
                if tok.kind not in (NAME, NAME_REF):
                    raise self.fail()
                self.pos += 1
                elements.append(tok.value)
            elif self.is_op("["):
                self.pos += 1
                tok = self.peek()
                if tok.kind != INTEGER:
                    raise self.fail()
                self.pos += 1
                if int(tok.value) > MAX_LIST_INDEX:
                    raise ExpressionError(f"List index is not within the allowable range; index: [{tok.value}]",
                                          counted=True)
                elements.append(int(tok.value))
                self.expect_op("]")
            else:
                return Path(tuple(elements))

    def operand(self) -> Operand:
        tok = self.peek()
        if tok.kind == VALUE_REF:
            self.pos += 1
            return ValueRef(tok.value)
        after = self.tokens[self.pos + 1] if tok.kind == NAME else None  # only a bare name calls a function
        if after is not None and after.kind == OP and after.value == "(":
            self.pos += 2
            args: list[Operand] = []
            if not self.is_op(")"):
                args.append(self.operand())
                while self.is_op(","):
                    self.pos += 1
                    args.append(self.operand())
            self.expect_op(")")
            return Call(tok.value, tuple(args))
        return self.path()

    # --- conditions --------------------------------------------------------------------------------

    def condition(self) -> Cond:
        node = self.conjunction()
        while self.is_keyword("OR"):
            self.pos += 1
            node = Or(node, self.conjunction())
        return node

    def conjunction(self) -> Cond:
        node = self.negation()
        while self.is_keyword("AND"):
            self.pos += 1
            node = And(node, self.negation())
        return node

    def negation(self) -> Cond:
        if self.is_keyword("NOT"):
            self.pos += 1
            return Not(self.negation())
        return self.primary()

    def primary(self) -> Cond:
        if self.is_op("("):
            open_at = self.pos
            self.pos += 1
            inner = self.condition()
            close_at = self.pos
            self.expect_op(")")
            self.closing[open_at] = close_at
            # "((a = :v))": a group whose whole content is another group.
            if self.closing.get(open_at + 1) == close_at - 1:
                raise ExpressionError("The expression has redundant parentheses;")
            return inner
        left = self.operand()
        tok = self.peek()
        if tok.kind == OP and tok.value in COMPARATORS:
            self.pos += 1
            return Compare(tok.value, left, self.operand())
        if tok.kind == KEYWORD and tok.value == "BETWEEN":
            self.pos += 1
            low = self.operand()
            if not self.is_keyword("AND"):
                raise self.fail()
            self.pos += 1
            return Between(left, low, self.operand())
        if tok.kind == KEYWORD and tok.value == "IN":
            self.pos += 1
            self.expect_op("(")
            choices = [self.operand()]
            while self.is_op(","):
                self.pos += 1
                choices.append(self.operand())
            self.expect_op(")")
            return In(left, tuple(choices))
        if isinstance(left, Call):
            return left
        raise self.fail()

    # --- update expressions ------------------------------------------------------------------------

    def set_value(self) -> Operand:
        left = self.set_term()
        tok = self.peek()
        if tok.kind == OP and tok.value in ("+", "-"):
            self.pos += 1
            return Arith(tok.value, left, self.set_term())
        return left

    def set_term(self) -> Operand:
        """An operand of a SET value, or a parenthesized SET value: `SET a = (a - :v)`."""
        if self.is_op("("):
            self.pos += 1
            inner = self.set_value()
            self.expect_op(")")
            return inner
        return self.operand()

    def update(self) -> UpdateAst:
        sets: list[tuple[Path, Operand]] = []
        removes: list[Path] = []
        adds: list[tuple[Path, ValueRef]] = []
        deletes: list[tuple[Path, ValueRef]] = []
        seen: set[str] = set()
        if self.peek().kind == EOF:
            raise self.fail()
        while self.peek().kind != EOF:
            tok = self.peek()
            if tok.kind != KEYWORD or tok.value not in _CLAUSES:
                raise self.fail()
            clause = tok.value
            if clause in seen:
                raise ExpressionError(
                    f'The "{clause}" section can only be used once in an update expression;'
                )
            seen.add(clause)
            self.pos += 1
            while True:
                target = self.path()
                if clause == "SET":
                    self.expect_op("=")
                    sets.append((target, self.set_value()))
                elif clause == "REMOVE":
                    removes.append(target)
                else:
                    ref = self.peek()
                    if ref.kind != VALUE_REF:
                        raise self.fail()
                    self.pos += 1
                    (adds if clause == "ADD" else deletes).append((target, ValueRef(ref.value)))
                if not self.is_op(","):
                    break
                self.pos += 1
        return UpdateAst(tuple(sets), tuple(removes), tuple(adds), tuple(deletes))

    def projection(self) -> tuple[Path, ...]:
        paths = [self.path()]
        while self.is_op(","):
            self.pos += 1
            paths.append(self.path())
        return tuple(paths)


def parse_condition(text: str) -> Cond:
    """Parse a Condition/Filter/KeyCondition expression; raises ExpressionError."""
    p = _Parser(text)
    node = p.condition()
    p.expect_end()
    return node


def parse_update(text: str) -> UpdateAst:
    """Parse an UpdateExpression; raises ExpressionError."""
    p = _Parser(text)
    node = p.update()
    p.expect_end()
    return node


def parse_projection(text: str) -> tuple[Path, ...]:
    """Parse a ProjectionExpression into its paths; raises ExpressionError."""
    p = _Parser(text)
    node = p.projection()
    p.expect_end()
    return node
