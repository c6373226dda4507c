"""JSON Schema for structured answers and tool arguments: builders, and validation naming the offending path.

The builders keep a schema to a few readable lines; validation is the ``jsonschema`` library's
(draft 2020-12), with each problem reported as ``$.path: message`` (``$.facts[0].content:
required property missing``), deepest-first in the order of the value checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import date
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

from anima.core.calendar import DATE_RANGE_TEXT, MomentError, moment_check

Schema = dict[str, Any]


# --- Builders ------------------------------------------------------------------------------------


def schema_object(properties: dict[str, Schema], *, required: Iterable[str] = (), description: str = "") -> Schema:
    """An object with these properties and no others; ``required`` names the ones that must be there."""
    required = list(required)
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise ValueError(f"required names no property: {', '.join(unknown)}")
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return _described(schema, description)


def schema_array(items: Schema, *, description: str = "") -> Schema:
    return _described({"type": "array", "items": items}, description)


def schema_string(
    *, min_length: int | None = None, max_length: int | None = None, nullable: bool = False, description: str = ""
) -> Schema:
    schema: Schema = {"type": _nullable("string", nullable)}
    if min_length is not None:
        schema["minLength"] = min_length
    if max_length is not None:
        schema["maxLength"] = max_length
    return _described(schema, description)


def schema_date(*, nullable: bool = False, description: str = "") -> Schema:
    """An ISO date (YYYY-MM-DD) within the dates Anima accepts."""
    return _described({"type": _nullable("string", nullable), "format": "date"}, description)


def schema_enum(values: Iterable[str], *, description: str = "") -> Schema:
    """A string that is one of ``values``."""
    return _described({"type": "string", "enum": list(values)}, description)


def schema_integer(
    *, minimum: int | None = None, maximum: int | None = None, nullable: bool = False, description: str = ""
) -> Schema:
    return _described(_bounded({"type": _nullable("integer", nullable)}, minimum, maximum), description)


def schema_number(*, minimum: float | None = None, maximum: float | None = None, description: str = "") -> Schema:
    return _described(_bounded({"type": "number"}, minimum, maximum), description)


def schema_boolean(*, description: str = "") -> Schema:
    return _described({"type": "boolean"}, description)


def _nullable(name: str, nullable: bool) -> str | list[str]:
    return [name, "null"] if nullable else name


def _bounded(schema: Schema, minimum: float | None, maximum: float | None) -> Schema:
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def _described(schema: Schema, description: str) -> Schema:
    if description:
        schema["description"] = description
    return schema


# --- Validation ----------------------------------------------------------------------------------


class SchemaError(ValueError):
    """The value does not match the schema; ``errors`` lists every problem as ``path: message``."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


# Only the formats Anima defines are checked (jsonschema treats "format" as an annotation otherwise).
_FORMATS = FormatChecker(formats=())


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@_FORMATS.checks("date", raises=(ValueError, MomentError))
def _date_format(value: Any) -> bool:
    """YYYY-MM-DD, a real day, within the accepted range (a value of another type is the "type" check's)."""
    if not isinstance(value, str):
        return True
    if not _ISO_DATE.fullmatch(value):
        return False
    moment_check(date.fromisoformat(value), field="date")
    return True


def schema_validate(*, value: Any, schema: Schema) -> None:
    """Raise SchemaError naming each path (``$.items[2].title``) that breaks ``schema``."""
    errors = list(Draft202012Validator(schema, format_checker=_FORMATS).iter_errors(value))
    # A value of the wrong type gets that one message; its other keywords (enum) say nothing more.
    mistyped = {tuple(error.absolute_path) for error in errors if error.validator == "type"}
    problems: list[tuple[list[tuple[int, int]], int, str]] = []
    required_listed: set[tuple] = set()
    for error in errors:
        where = tuple(error.absolute_path)
        if error.validator != "type" and where in mistyped:
            continue
        if error.validator == "required":
            # jsonschema reports each missing name apart; the first report lists them all.
            if where in required_listed:
                continue
            required_listed.add(where)
        keyword_rank = _KEYWORD_ORDER.get(error.validator, len(_KEYWORD_ORDER))
        for name, rank, message in _problems(error):
            order = _value_order(value, where) + ([] if rank is None else [rank])
            path = [*where] if name is None else [*where, name]
            problems.append((order, keyword_rank, f"{_path(path)}: {message}"))
    if problems:
        problems.sort(key=lambda problem: problem[:2])
        raise SchemaError([message for _, _, message in problems])


_KEYWORD_ORDER = {"type": 0, "enum": 1, "minLength": 2, "maxLength": 3, "minimum": 4, "maximum": 5}


def _problems(error: ValidationError) -> Iterator[tuple[str | None, tuple[int, int] | None, str]]:
    """(property name, its rank, message) for each problem that one jsonschema error stands for.

    A problem of a property (missing, not allowed) names it; the rank puts missing names first,
    in ``required`` order, then the value's own properties in their order.
    """
    keyword, expected, instance = error.validator, error.validator_value, error.instance
    if keyword == "type":
        names = expected if isinstance(expected, list) else [expected]
        yield None, None, f"expected {' or '.join(names)}, got {_type_name(instance)}"
    elif keyword == "enum":
        yield None, None, f"{instance!r} is not one of {expected!r}"
    elif keyword == "minLength":
        yield None, None, f"shorter than {expected} characters"
    elif keyword == "maxLength":
        yield None, None, f"longer than {expected} characters"
    elif keyword == "format" and expected == "date":
        yield None, None, f"{instance!r} is not a date (YYYY-MM-DD) {DATE_RANGE_TEXT}"
    elif keyword == "minimum":
        yield None, None, f"{instance} is below the minimum {expected}"
    elif keyword == "maximum":
        yield None, None, f"{instance} is above the maximum {expected}"
    elif keyword == "required":
        for index, name in enumerate(expected):
            if name not in instance:
                yield name, (0, index), "required property missing"
    elif keyword == "additionalProperties" and expected is False:
        properties = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        for index, name in enumerate(instance):
            if name not in properties and not any(re.search(pattern, name) for pattern in patterns):
                yield name, (1, index), "property not allowed"
    else:
        yield None, None, error.message


def _path(parts: Iterable) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def _value_order(value: Any, path: Iterable) -> list[tuple[int, int]]:
    """Where ``path`` comes when ``value`` is walked depth-first, items and properties in their order."""
    order = []
    for part in path:
        index = part if isinstance(value, list) else list(value).index(part)
        order.append((1, index))
        value = value[part]
    return order


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    for name, types in _TYPES.items():
        if isinstance(value, types):
            return name
    return type(value).__name__


_TYPES: dict[str, tuple[type, ...]] = {
    "number": (float,),
    "string": (str,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
