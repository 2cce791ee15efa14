"""Requests generated from botocore's service models, then mutated: for the fuzzing test (test_model_fuzz.py).

Each request starts as a plausible one for its operation (every member filled from its shape: enums, lengths
and ranges mostly respected), then each value is mutated with some probability: the wrong JSON type, null, an
empty or huge string, a number out of range, a structure nested past any limit, a required member dropped, an
unknown member added. Table names come from a small pool the test owns, so the fuzzing cannot touch other tables.
"""

from __future__ import annotations

import base64
import random
import string
from typing import Any

import botocore.session
from botocore.model import OperationModel, ServiceModel, Shape

_SESSION = botocore.session.get_session()


def service(name: str) -> ServiceModel:
    return _SESSION.get_service_model(name)


class RequestMaker:
    """Mutated requests for the operations of one service model, from one seeded random source."""

    def __init__(self, model: ServiceModel, tables: list[str], seed: int, mutation_rate: float = 0.15) -> None:
        self.model = model
        self.tables = tables
        self.random = random.Random(seed)
        self.rate = mutation_rate

    def request(self, operation: OperationModel) -> Any:
        shape = operation.input_shape
        if shape is None:
            return {}
        return self._value(shape, 0, "")

    # --- values ----------------------------------------------------------------------------------------
    def _value(self, shape: Shape, depth: int, name: str) -> Any:
        if self.random.random() < self.rate:
            return self._mutant(shape, depth)
        return self._plausible(shape, depth, name)

    def _plausible(self, shape: Shape, depth: int, name: str) -> Any:
        kind = shape.type_name
        if kind == "structure":
            return self._structure(shape, depth)
        if kind == "list":
            count = self.random.choice((0, 1, 1, 2, 3)) if depth < 6 else 0
            return [self._value(shape.member, depth + 1, name) for _ in range(count)]
        if kind == "map":
            count = self.random.choice((0, 1, 1, 2)) if depth < 6 else 0
            return {self._string(shape.key, name): self._value(shape.value, depth + 1, name) for _ in range(count)}
        if kind == "string":
            return self._string(shape, name)
        if kind in ("integer", "long"):
            low = shape.metadata.get("min", 0)
            high = shape.metadata.get("max", low + 100)
            return self.random.randint(int(low), int(min(high, low + 1000)))
        if kind == "double":
            return self.random.uniform(0, 100)
        if kind == "boolean":
            return self.random.random() < 0.5
        if kind == "blob":
            return base64.b64encode(self.random.randbytes(self.random.randint(0, 8))).decode()
        if kind == "timestamp":
            return self.random.randint(0, 2_000_000_000)
        return None

    def _structure(self, shape: Shape, depth: int) -> dict[str, Any]:
        members = shape.members
        if shape.name == "AttributeValue" or shape.metadata.get("union"):  # one member, as a union has
            names = [self.random.choice(list(members))] if depth < 8 else ["S"]
        else:
            required = set(shape.required_members)
            names = [member for member in members if member in required or self.random.random() < 0.4]
        value = {member: self._value(members[member], depth + 1, member) for member in names}
        if value and self.random.random() < self.rate / 3:
            del value[self.random.choice(list(value))]
        if self.random.random() < self.rate / 3:
            value["Unknown" + str(self.random.randint(0, 9))] = 1
        return value

    def _string(self, shape: Shape, name: str) -> str:
        enum = shape.metadata.get("enum")
        if enum:
            return str(self.random.choice(enum))
        if name in ("TableName", "TableArn", "ResourceArn", "GlobalTableName") or shape.name in ("TableName",
                                                                                                 "TableArn"):
            return self.random.choice(self.tables)
        if name == "N" or shape.name in ("NumberAttributeValue",):
            return self.random.choice(("0", "1", "-1.5", "1e10", "99999999999999999999999999999999999999"))
        if shape.name in ("BinaryAttributeValue",):
            return base64.b64encode(self.random.randbytes(4)).decode()
        low = int(shape.metadata.get("min", 1))
        length = self.random.randint(low, max(low, min(int(shape.metadata.get("max", 12)), low + 12)))
        return "".join(self.random.choice(string.ascii_letters + string.digits + "#:_.") for _ in range(length))

    def _mutant(self, shape: Shape, depth: int) -> Any:
        choice = self.random.randrange(9)
        if choice == 0:
            return None
        if choice == 1:
            return ""
        if choice == 2:
            return "x" * self.random.choice((256, 1025, 70_000))
        if choice == 3:
            return self.random.choice((-1, 0, 2**63, -(2**63) - 1, 1.5e308))
        if choice == 4:
            return self.random.choice((True, [], {}, [1, "a"], {"S": 1}))
        if choice == 5:  # deep nesting
            value: Any = {"S": "deep"}
            for _ in range(self.random.choice((33, 40, 100))):
                value = {"M": {"a": value}} if self.random.random() < 0.5 else {"L": [value]}
            return value
        if choice == 6:
            return "\u0000\ud7ff\ufffe" + "é" * 3
        if choice == 7 and shape.type_name == "structure":
            return {"S": "a", "N": "1"}  # two members where one is allowed
        return [self._plausible(shape, depth + 1, "")] * self.random.choice((1, 26, 101))
