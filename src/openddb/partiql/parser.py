"""A recursive-descent parser for the PartiQL statements DynamoDB runs (its Developer Guide's "PartiQL for
DynamoDB" reference: SELECT, INSERT, UPDATE, DELETE, the functions and operators). Literals become attribute
values here; `?` parameters are bound later, so one parsed statement serves every set of parameters."""

from __future__ import annotations

from typing import Literal, cast

from openddb.errors import ValidationException
from openddb.model import AttributeValue
from openddb.model.values import validate_value
from openddb.partiql import ast
from openddb.partiql.lexer import Token, malformed, tokenize

_COMPARISONS = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_FUNCTIONS = frozenset({"begins_with", "contains", "attribute_type", "size", "list_append", "set_add",
                        "set_delete", "if_not_exists"})
_RETURNING = {("ALL", "OLD"): "ALL_OLD", ("MODIFIED", "OLD"): "UPDATED_OLD", ("ALL", "NEW"): "ALL_NEW",
              ("MODIFIED", "NEW"): "UPDATED_NEW"}


class _Parser:
    def __init__(self, statement: str) -> None:
        self.tokens = tokenize(statement)
        self.at = 0
        self.params = 0

    # --- tokens -------------------------------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def take(self) -> Token:
        token = self.tokens[self.at]
        if token.kind != "end":
            self.at += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.token
        if (token.kind == "punct" and token.text == text) or token.is_word(text):
            self.at += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.unexpected()

    def unexpected(self) -> ValidationException:
        token = self.token
        if token.kind == "end":
            return malformed("Unexpected end of statement")  # best guess: detail not recorded
        if token.kind == "word" and token.text.upper() in _KEYWORDS:
            return malformed("Unexpected keyword")  # DynamoDB's words (PyDynamoDB issue 26)
        return malformed("Unexpected token")  # best guess: detail not recorded

    # --- statements ---------------------------------------------------------------------------------------

    def statement(self) -> ast.Statement:
        token = self.token
        parsed: ast.Statement
        if token.is_word("SELECT"):
            parsed = self.select()
        elif token.is_word("INSERT"):
            parsed = self.insert()
        elif token.is_word("UPDATE"):
            parsed = self.update()
        elif token.is_word("DELETE"):
            parsed = self.delete()
        elif token.is_word("EXISTS"):
            self.at += 1
            self.expect("(")
            parsed = ast.Exists(self.select())
            self.expect(")")
        else:
            # DynamoDB's words (aws-sdk-for-javascript-v3 issue 98, dynoxide PR 149)
            raise malformed("Expected data manipulation")
        self.accept(";")
        if self.token.kind != "end":
            raise self.unexpected()
        return parsed

    def name(self) -> str:
        token = self.token
        if token.kind == "quoted" or (token.kind == "word" and token.text.upper() not in _KEYWORDS):
            self.at += 1
            return token.text
        raise self.unexpected()

    def select(self) -> ast.Select:
        self.expect("SELECT")
        projection: tuple[ast.Path, ...] | None = None
        if not self.accept("*"):
            paths = [self.path()]
            while self.accept(","):
                paths.append(self.path())
            projection = tuple(paths)
        self.expect("FROM")
        table = self.name()
        index = self.name() if self.accept(".") else None
        where = self.condition() if self.accept("WHERE") else None
        descending = ordered = False
        order: list[ast.Path] = []
        if self.accept("ORDER"):
            ordered = True
            self.expect("BY")
            while True:
                order.append(self.path())
                if self.accept("DESC"):
                    descending = True
                else:
                    self.accept("ASC")
                if not self.accept(","):
                    break
        return ast.Select(projection, table, index, where, descending, ordered, tuple(order))

    def insert(self) -> ast.Insert:
        self.expect("INSERT")
        self.expect("INTO")
        table = self.name()
        self.expect("VALUE")
        return ast.Insert(table, self.operand())

    def update(self) -> ast.Update:
        self.expect("UPDATE")
        table = self.name()
        sets: list[tuple[ast.Path, ast.Expr]] = []
        removes: list[ast.Path] = []
        while True:
            if self.accept("SET"):
                while True:
                    target = self.path()
                    self.expect("=")
                    sets.append((target, self.value_expression()))
                    if not self.accept(","):
                        break
            elif self.accept("REMOVE"):
                removes.append(self.path())
                while self.accept(","):
                    removes.append(self.path())
            else:
                break
        if not sets and not removes:
            raise self.unexpected()
        self.expect("WHERE")
        where = self.condition()
        return ast.Update(table, tuple(sets), tuple(removes), where, self.returning())

    def delete(self) -> ast.Delete:
        self.expect("DELETE")
        self.expect("FROM")
        table = self.name()
        self.expect("WHERE")
        where = self.condition()
        returning = self.returning()
        if returning not in (None, "ALL_OLD"):
            # "<returnvalues> ::= ALL OLD *" (Developer Guide, "PartiQL delete statements for DynamoDB"): there is
            # no new item to return. best guess at the detail of the refusal, not recorded
            raise malformed("Unexpected token")
        return ast.Delete(table, where, returning)

    def returning(self) -> ast.Returning | None:
        if not self.accept("RETURNING"):
            return None
        first, second = self.take(), self.take()
        mode = _RETURNING.get((first.text.upper(), second.text.upper()))
        if mode is None or not self.accept("*"):
            raise self.unexpected()
        return cast(ast.Returning, mode)

    # --- conditions ---------------------------------------------------------------------------------------

    def condition(self) -> ast.Expr:
        left = self.conjunction()
        while self.accept("OR"):
            left = ast.Or(left, self.conjunction())
        return left

    def conjunction(self) -> ast.Expr:
        left = self.negation()
        while self.accept("AND"):
            left = ast.And(left, self.negation())
        return left

    def negation(self) -> ast.Expr:
        if self.accept("NOT"):
            return ast.Not(self.negation())
        return self.predicate()

    def predicate(self) -> ast.Expr:
        if self.token.kind == "punct" and self.token.text == "(":
            self.at += 1
            inner = self.condition()
            self.expect(")")
            return inner
        left = self.value_expression()
        token = self.token
        if token.kind == "punct" and token.text in _COMPARISONS:
            self.at += 1
            return ast.Compare(cast(ast.CompareOp, _COMPARISONS[token.text]), left, self.value_expression())
        negated = self.accept("NOT")
        if self.accept("BETWEEN"):
            low = self.value_expression()
            self.expect("AND")
            between: ast.Expr = ast.Between(left, low, self.value_expression())
            return ast.Not(between) if negated else between
        if self.accept("IN"):
            options = self.in_list()
            return ast.Not(ast.In(left, options)) if negated else ast.In(left, options)
        if negated:
            raise self.unexpected()
        if self.accept("IS"):
            negated = self.accept("NOT")
            kind: Literal["MISSING", "NULL"] = "NULL" if self.accept("NULL") else "MISSING"
            if kind == "MISSING":
                self.expect("MISSING")
            if not isinstance(left, ast.Path):
                raise self.unexpected()
            return ast.Is(left, kind, negated)
        if isinstance(left, ast.Call):
            return left  # a function that is a condition in itself: begins_with, contains, attribute_type
        raise self.unexpected()

    def in_list(self) -> tuple[ast.Expr, ...]:
        closing = "]" if self.accept("[") else ")"
        if closing == ")":
            self.expect("(")
        options = [self.operand()]
        while self.accept(","):
            options.append(self.operand())
        self.expect(closing)
        return tuple(options)

    # --- values -------------------------------------------------------------------------------------------

    def value_expression(self) -> ast.Expr:
        left = self.operand()
        while self.token.kind == "punct" and self.token.text in ("+", "-"):
            left = ast.Arith("+" if self.take().text == "+" else "-", left, self.operand())
        return left

    def operand(self) -> ast.Expr:
        token = self.token
        if token.kind == "param":
            self.at += 1
            self.params += 1
            return ast.Param(self.params - 1)
        if token.kind == "string":
            self.at += 1
            return ast.Value({"S": token.text})
        if token.kind == "number" or (token.kind == "punct" and token.text == "-"
                                      and self.tokens[self.at + 1].kind == "number"):
            return ast.Value(self.number())
        if token.kind == "punct":
            return self.container(token.text)
        if token.kind == "word":
            word = token.text.upper()
            if word in ("TRUE", "FALSE"):
                self.at += 1
                return ast.Value({"BOOL": word == "TRUE"})
            if word == "NULL":
                self.at += 1
                return ast.Value({"NULL": True})
            if token.text.lower() in _FUNCTIONS and self.tokens[self.at + 1].text == "(":
                return self.call()
        return self.path()

    def number(self) -> AttributeValue:
        sign = "-" if self.accept("-") else ""
        text = sign + self.take().text
        try:
            return validate_value({"N": text})
        except ValidationException as error:
            raise malformed(error.message or "Invalid number") from None  # best guess at the wording

    def container(self, opener: str) -> ast.Expr:
        if opener == "[":
            self.at += 1
            return ast.ListOf(self.items("]"))
        if opener == "<<":
            self.at += 1
            return ast.SetOf(self.items(">>"))
        if opener == "{":
            self.at += 1
            entries: list[tuple[str, ast.Expr]] = []
            if not self.accept("}"):
                while True:
                    key = self.token
                    if key.kind not in ("string", "quoted"):
                        raise self.unexpected()
                    self.at += 1
                    self.expect(":")
                    entries.append((key.text, self.operand()))
                    if not self.accept(","):
                        break
                self.expect("}")
            return ast.MapOf(tuple(entries))
        raise self.unexpected()

    def items(self, closing: str) -> tuple[ast.Expr, ...]:
        if self.accept(closing):
            return ()
        items = [self.operand()]
        while self.accept(","):
            items.append(self.operand())
        self.expect(closing)
        return tuple(items)

    def call(self) -> ast.Call:
        name = self.take().text.lower()
        self.expect("(")
        args: list[ast.Expr] = []
        if not self.accept(")"):
            args.append(self.value_expression())
            while self.accept(","):
                args.append(self.value_expression())
            self.expect(")")
        return ast.Call(name, tuple(args))

    def path(self) -> ast.Path:
        steps: list[ast.Step] = [self.name()]
        while True:
            if self.accept("."):
                if self.token.kind == "word" and self.token.text.upper() in _DOT_KEYWORDS:
                    # DynamoDB's words for a keyword after a dot, unquoted (PyDynamoDB issue 28: `payload.size`)
                    raise malformed("Invalid path dot component")
                steps.append(self.name())
            elif self.accept("["):
                index = self.take()
                if index.kind != "number" or not index.text.isdigit():
                    raise self.unexpected()
                steps.append(int(index.text))
                self.expect("]")
            else:
                return ast.Path(tuple(steps))


# Words that cannot be a bare identifier (a quoted one may be anything).
_KEYWORDS = frozenset({"SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "IS", "BETWEEN", "MISSING", "INSERT",
                       "INTO", "VALUE", "VALUES", "UPDATE", "SET", "REMOVE", "DELETE", "RETURNING", "ORDER", "BY",
                       "ASC", "DESC", "TRUE", "FALSE", "NULL", "EXISTS"})


# After a dot, SIZE is refused too, as recorded (PyDynamoDB issue 28; a reserved word of SQL, which PartiQL keeps).
# best guess: the rest of SQL's reserved words are not checked (which of them DynamoDB refuses is not recorded).
_DOT_KEYWORDS = _KEYWORDS | {"SIZE"}


def parse(statement: str) -> tuple[ast.Statement, int]:
    """The statement's tree and its number of `?` parameters."""
    parser = _Parser(statement)
    return parser.statement(), parser.params
