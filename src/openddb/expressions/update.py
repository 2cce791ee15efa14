"""UpdateExpression: compile once per request, then ``apply(old_item) -> new_item`` (pure).

Every action reads the item as it was before the update. The new item shares unchanged values with the old
one; containers on a written path are copied first, so the input is never mutated.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ValidationException
from ..model.numbers import add_numbers, subtract_numbers
from ..model.values import MAX_NESTING_DEPTH, MSG_NESTING, type_of
from .ast import Arith, Call, ExpressionError, Operand, Path, UpdateAst, ValueRef
from .evaluate import operand_type_error
from .projection import build_trie, project
from .resolve import AttributeValue, ExpressionAttributes, Item, Resolved, check_no_overlap, get_path

Value = Callable[[Item], AttributeValue]

_SETS = frozenset({"SS", "NS", "BS"})
# ADD/DELETE report the operand type spelled out.
_TYPE_WORDS = {
    "S": "STRING", "N": "NUMBER", "B": "BINARY", "BOOL": "BOOLEAN", "NULL": "NULL", "L": "LIST", "M": "MAP",
    "SS": "STRING_SET", "NS": "NUMBER_SET", "BS": "BINARY_SET",
}

INVALID_PATH = "The document path provided in the update expression is invalid for update"
MISSING_ATTRIBUTE = "The provided expression refers to an attribute that does not exist in the item"
WRONG_TYPE = "An operand in the update expression has an incorrect data type"


class Update:
    """A compiled UpdateExpression."""

    __slots__ = ("_adds", "_deletes", "_removes", "_sets", "_targets", "_trie", "action_counts",
                 "arithmetic_sets", "assigned_top_level_names")

    def __init__(
        self,
        sets: list[tuple[Resolved, Value]],
        removes: list[Resolved],
        adds: list[tuple[Resolved, AttributeValue]],
        deletes: list[tuple[Resolved, AttributeValue]],
        arithmetic_sets: int = 0,
    ) -> None:
        self._sets = sets
        self._removes = removes
        self._adds = adds
        self._deletes = deletes
        self._targets = [p for p, _ in sets] + removes + [p for p, _ in adds] + [p for p, _ in deletes]
        self._trie = build_trie(self._targets)
        self.assigned_top_level_names: frozenset[str] = frozenset(str(p[0]) for p in self._targets)
        # (actions that write a value, actions that remove one, SET actions through a list index), counted once:
        # a compiled update is cached and reused.
        self.action_counts = (len(sets) + len(adds) + len(deletes), len(removes),
                              sum(1 for path, _ in sets if any(isinstance(step, int) for step in path)))
        # SET actions whose value is `a + b` or `a - b`: DynamoDB's UpdateItem size measure charges them extra.
        self.arithmetic_sets = arithmetic_sets

    def written_paths(self) -> list[Resolved]:
        """The path each SET, ADD and DELETE action writes."""
        return [p for p, _ in self._sets] + [p for p, _ in self._adds] + [p for p, _ in self._deletes]

    def updated_top_level_names(self) -> frozenset[str]:
        """Top-level attributes this update writes or removes."""
        return self.assigned_top_level_names

    def apply(self, item: Item | None, *, missing: bool = False) -> Item:
        """The item after the update; ``item`` (None = no item yet) is left untouched. ``missing``: there is no
        item, and ``item`` holds only the key of the one the update creates."""
        old: Item = item if item is not None else {}
        missing = missing or item is None
        # Compute every new value against the old item before writing anything.
        writes: list[tuple[Resolved, AttributeValue | None]] = [(p, value(old)) for p, value in self._sets]
        for path in self._removes:
            # REMOVE a.b on an item that does not exist removes nothing and is no error (DynamoDB answers it as a
            # no-op, issue 30), while on an item without `a` the path is invalid, as for SET.
            if not (missing and len(path) > 1):
                writes.append((path, None))
        for path, operand in self._adds:
            writes.append((path, _add(get_path(old, path), operand)))
        for path, operand in self._deletes:
            current = get_path(old, path)
            if current is not None:
                writes.append((path, _delete(current, operand)))
        # An update may not build what PutItem refuses: too deep an item. (A top-level value cannot be: every
        # value it is made of, from the request or the item, is itself no deeper than the limit.)
        for path, written in writes:
            if written is not None and len(path) > 1 and len(path) + _depth(written) - 1 > MAX_NESTING_DEPTH:
                raise ValidationException(MSG_NESTING)
        return _Writer(old).run(writes)


def _depth(value: AttributeValue) -> int:
    """Nesting levels of a value: 1 for a scalar or set, one more per map or list around the deepest inside."""
    if "M" in value:
        inner = value["M"].values()
    elif "L" in value:
        inner = value["L"]
    else:
        return 1
    return 1 + max((_depth(v) for v in inner), default=0)


def updated_values(update: Update, item: Item | None) -> Item:
    """``item`` projected on the paths ``update`` touches: UPDATED_OLD (old item) / UPDATED_NEW (new item)."""
    if not item:
        return {}
    return project(item, update._trie)


def _add(current: AttributeValue | None, operand: AttributeValue) -> AttributeValue:
    if current is None:
        return operand
    if "N" in operand:
        if "N" not in current:
            raise ValidationException(WRONG_TYPE)
        return {"N": add_numbers(current["N"], operand["N"])}
    ((t, members),) = operand.items()
    existing = current.get(t)
    if existing is None:
        raise ValidationException(WRONG_TYPE)
    seen = set(existing)
    return {t: existing + [m for m in members if m not in seen]}


def _delete(current: AttributeValue, operand: AttributeValue) -> AttributeValue | None:
    ((t, members),) = operand.items()
    existing = current.get(t)
    if existing is None:
        raise ValidationException(WRONG_TYPE)
    gone = set(members)
    left = [m for m in existing if m not in gone]
    # An emptied set is removed: DynamoDB has no empty sets.
    return {t: left} if left else None


class _Writer:
    """Applies writes to a copy-on-write clone of the old item."""

    __slots__ = ("appends", "owned", "removals", "root")

    def __init__(self, old: Item) -> None:
        self.root: Item = dict(old)
        # id -> container we copied; keeping them alive keeps their ids unique.
        self.owned: dict[int, AttributeValue] = {}
        self.removals: dict[int, tuple[list[AttributeValue], set[int]]] = {}
        self.appends: dict[int, tuple[list[AttributeValue], list[tuple[int, AttributeValue]]]] = {}

    def own(self, holder: dict[str, AttributeValue] | list[AttributeValue], key: str | int,
            av: AttributeValue) -> AttributeValue:
        if id(av) in self.owned:
            return av
        if "M" in av:
            av = {"M": dict(av["M"])}
        elif "L" in av:
            av = {"L": list(av["L"])}
        else:
            return av
        holder[key] = av  # type: ignore[index]
        self.owned[id(av)] = av
        return av

    def parent(self, path: Resolved) -> tuple[object, str | int]:
        """The owned container holding the last step of ``path`` and that step. Raises the invalid-path error
        when a container on the way is absent or of the wrong type."""
        holder: object = self.root
        key: str | int = path[0]
        for el in path[1:]:
            if isinstance(holder, dict):
                av = holder.get(key)
            else:
                assert isinstance(holder, list) and type(key) is int
                av = holder[key] if key < len(holder) else None
            if av is None:
                raise ValidationException(INVALID_PATH)
            av = self.own(holder, key, av)
            holder = av.get("L") if type(el) is int else av.get("M")
            if holder is None:
                raise ValidationException(INVALID_PATH)
            key = el
        return holder, key

    def run(self, writes: list[tuple[Resolved, AttributeValue | None]]) -> Item:
        for path, value in writes:
            if value is None:
                self.remove(path)
            else:
                self.set(path, value)
        # List elements are removed highest index first, so every index means the old position; before any
        # append, so an index past the old end removes nothing (not an element this update appends).
        for seq, indexes in self.removals.values():
            for index in sorted(indexes, reverse=True):
                if index < len(seq):
                    del seq[index]
        # Elements set beyond a list's end are appended in index order, whatever the order of the actions.
        for seq, pending in self.appends.values():
            seq.extend(value for _, value in sorted(pending, key=lambda entry: entry[0]))
        return self.root

    def set(self, path: Resolved, value: AttributeValue) -> None:
        holder, key = self.parent(path)
        if isinstance(holder, list):
            assert type(key) is int
            if key < len(holder):
                holder[key] = value
            else:  # beyond the end: appended, after every action (see `run`)
                self.appends.setdefault(id(holder), (holder, []))[1].append((key, value))
        else:
            holder[key] = value  # type: ignore[index]

    def remove(self, path: Resolved) -> None:
        # A missing attribute is no error, but a missing map or list on the way to it is.
        holder, key = self.parent(path)
        if isinstance(holder, list):
            assert type(key) is int
            self.removals.setdefault(id(holder), (holder, set()))[1].add(key)
        else:
            holder.pop(key, None)  # type: ignore[attr-defined]


class _UpdateCompiler:
    __slots__ = ("attrs",)

    def __init__(self, attrs: ExpressionAttributes) -> None:
        self.attrs = attrs

    def value(self, node: Operand) -> Value:
        attrs = self.attrs
        if isinstance(node, ValueRef):
            av = attrs.value(node.name)
            return lambda item: av
        if isinstance(node, Path):
            path = attrs.path(node)

            def read(item: Item) -> AttributeValue:
                found = get_path(item, path)
                if found is None:
                    raise ValidationException(MISSING_ATTRIBUTE)
                return found
            return read
        if isinstance(node, Arith):
            return self.arith(node)
        return self.call(node)

    def constant(self, node: Operand) -> AttributeValue | None:
        return self.attrs.value(node.name) if isinstance(node, ValueRef) else None

    def arith(self, node: Arith) -> Value:
        left, right = self.value(node.left), self.value(node.right)
        for side in (node.left, node.right):
            const = self.constant(side)
            if const is not None and "N" not in const:
                raise operand_type_error(node.op, const)
        combine = add_numbers if node.op == "+" else subtract_numbers

        def run(item: Item) -> AttributeValue:
            a, b = left(item), right(item)
            if "N" not in a or "N" not in b:
                raise ValidationException(WRONG_TYPE)
            return {"N": combine(a["N"], b["N"])}
        return run

    def call(self, node: Call) -> Value:
        if node.name == "if_not_exists":
            assert isinstance(node.args[0], Path)
            path = self.attrs.path(node.args[0])
            fallback = self.value(node.args[1])

            def if_not_exists(item: Item) -> AttributeValue:
                found = get_path(item, path)
                return found if found is not None else fallback(item)
            return if_not_exists
        first, second = self.value(node.args[0]), self.value(node.args[1])
        for arg in node.args:
            const = self.constant(arg)
            if const is not None and "L" not in const:
                raise operand_type_error("list_append", const)

        def list_append(item: Item) -> AttributeValue:
            a, b = first(item), second(item)
            if "L" not in a or "L" not in b:
                raise ValidationException(WRONG_TYPE)
            return {"L": a["L"] + b["L"]}
        return list_append

    def set_operand(self, clause: str, ref: ValueRef) -> AttributeValue:
        av = self.attrs.value(ref.name)
        t = type_of(av)
        if t not in _SETS and (clause == "DELETE" or t != "N"):
            # With the operand types the clause allows named as DynamoDB names them (quoted since 2022).
            raise ExpressionError(
                "Incorrect operand type for operator or function; "
                f"operator: {clause}, operand type: {_TYPE_WORDS.get(t, t)}, typeSet: ALLOWED_FOR_{clause}_OPERAND"
            )
        return av

    def compile(self, node: UpdateAst) -> Update:
        sets = [(self.attrs.path(p), self.value(v)) for p, v in node.set]
        removes = [self.attrs.path(p) for p in node.remove]
        adds = [(self.attrs.path(p), self.set_operand("ADD", v)) for p, v in node.add]
        deletes = [(self.attrs.path(p), self.set_operand("DELETE", v)) for p, v in node.delete]
        targets = [p for p, _ in sets] + removes + [p for p, _ in adds] + [p for p, _ in deletes]
        check_no_overlap(targets)
        return Update(sets, removes, adds, deletes, sum(1 for _, value in node.set if isinstance(value, Arith)))


def compile_update_ast(node: UpdateAst, attrs: ExpressionAttributes) -> Update:
    """Resolve a validated update tree against ``attrs``; raises ExpressionError."""
    return _UpdateCompiler(attrs).compile(node)
