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


def schema_object(
    properties: dict[str, Schema], *, required: Iterable[str] = (), nullable: bool = False, description: str = ""
) -> Schema:
    """An object with these properties and no others; ``required`` names the ones that must be there."""
    required = list(required)
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise ValueError(f"required names no property: {', '.join(unknown)}")
    schema = {
        "type": _nullable("object", nullable),
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return _described(schema, description)


def schema_array(items: Schema, *, max_items: int, nullable: bool = False, description: str = "") -> Schema:
    """A list of at most ``max_items``: a bound a grammar-constrained model cannot repeat itself past."""
    return _described({"type": _nullable("array", nullable), "items": items, "maxItems": max_items}, description)


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


def schema_enum(values: Iterable[str], *, nullable: bool = False, description: str = "") -> Schema:
    """A string that is one of ``values`` (or null when ``nullable``)."""
    values = list(values)
    return _described(
        {"type": _nullable("string", nullable), "enum": [*values, None] if nullable else values}, description
    )


def schema_integer(
    *, minimum: int | None = None, maximum: int | None = None, nullable: bool = False, description: str = ""
) -> Schema:
    return _described(_bounded({"type": _nullable("integer", nullable)}, minimum, maximum), description)


def schema_number(
    *, minimum: float | None = None, maximum: float | None = None, nullable: bool = False, description: str = ""
) -> Schema:
    return _described(_bounded({"type": _nullable("number", nullable)}, minimum, maximum), description)


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


# --- The form a server enforces ------------------------------------------------------------------

# Checked here after the answer, never sent: a grammar compiler unrolls a length bound into one rule per
# character (llama-cpp-python's crashed on a maxLength of 2000) and some reject look-around patterns.
_LOCAL_ONLY = frozenset({"minLength", "maxLength", "pattern"})


def schema_strict(schema: Schema) -> Schema:
    """``schema`` as a server's strict mode and grammar compilers take it.

    Every property is required (an optional one must be nullable: the model answers null for it),
    every nullable value is ``anyOf [value, null]`` (a type list loses a value's other keywords in
    some compilers), every array is bounded, and length and pattern constraints stay local.
    Raises ValueError naming the path of a part that cannot be made strict.
    """
    return _strict(schema, "$")


def _strict(schema: Schema, where: str) -> Schema:
    kind = schema.get("type")
    if isinstance(kind, list):
        types = [name for name in kind if name != "null"]
        if len(types) != 1 or len(kind) != 2:
            raise ValueError(f"{where}: a type list must be one type and null, got {kind}")
        value = {key: item for key, item in schema.items() if key != "description"}
        value["type"] = types[0]
        if "enum" in value:
            value["enum"] = [item for item in value["enum"] if item is not None]
        return _described({"anyOf": [_strict(value, where), {"type": "null"}]}, schema.get("description", ""))
    strict = {key: item for key, item in schema.items() if key not in _LOCAL_ONLY}
    if kind == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            raise ValueError(f"{where}: an object must forbid additional properties")
        required = set(schema.get("required", []))
        for name, item in properties.items():
            if name not in required and not _accepts_null(item):
                raise ValueError(f"{where}.{name}: a property must be required or nullable")
        strict["properties"] = {name: _strict(item, f"{where}.{name}") for name, item in properties.items()}
        strict["required"] = list(properties)
    elif kind == "array":
        if "maxItems" not in schema:
            raise ValueError(f"{where}: an array must have maxItems")
        strict["items"] = _strict(schema["items"], f"{where}[]")
    return strict


def _accepts_null(schema: Schema) -> bool:
    kind = schema.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def optional_nulls_dropped(*, value: Any, schema: Schema) -> Any:
    """``value`` without the nulls a strict answer gives for properties ``schema`` does not require.

    A caller reads such a property as absent: strict mode makes the model send every property.
    """
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties, required = schema["properties"], set(schema.get("required", []))
        return {
            key: optional_nulls_dropped(value=item, schema=properties.get(key, {}))
            for key, item in value.items()
            if not (item is None and key not in required)
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [optional_nulls_dropped(value=item, schema=schema["items"]) for item in value]
    return value


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
