"""Every schema a nightly stage asks a model for is one that strict servers take and grammar compilers compile.

The stage schemas are found by name (``*_SCHEMA`` in the sleep and temporal modules), so a new stage is
checked without being listed here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import pytest
from llguidance import LLMatcher

import sleep
import temporal
from anima.core.llm.schema import schema_strict
from temporal.services import sections_schema


def _stage_schemas() -> dict[str, dict]:
    found: dict[str, dict] = {}
    for package in (sleep, temporal):
        for module_info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if ".migrations" in module_info.name or ".management" in module_info.name:
                continue
            module = importlib.import_module(module_info.name)
            for name, value in vars(module).items():
                if name.endswith("_SCHEMA") and isinstance(value, dict) and value.get("type") == "object":
                    found.setdefault(name, value)
    found["sections_schema(4)"] = sections_schema(4)
    return found


STAGE_SCHEMAS = _stage_schemas()


def test_the_stage_schemas_are_found():
    # The light-sleep, deep-sleep, dream, self-layer and temporal stages all ask for structured answers.
    expected = {"SEMANTIC_SCHEMA", "LIMBIC_SCHEMA", "MERGE_SCHEMA", "DREAM_SCHEMA", "SELF_LAYER_SCHEMA", "CHUNK_SCHEMA"}
    assert expected <= set(STAGE_SCHEMAS)


def _walk(schema: dict, where: str = "$") -> Iterator[tuple[str, dict]]:
    yield where, schema
    for branch in schema.get("anyOf", []):
        yield from _walk(branch, where)
    for name, item in schema.get("properties", {}).items():
        yield from _walk(item, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{where}[]")


@pytest.mark.parametrize("name", sorted(STAGE_SCHEMAS))
def test_a_stage_schema_is_strict_valid_and_bounded(name):
    schema = STAGE_SCHEMAS[name]
    for where, part in _walk(schema):
        kinds = part.get("type") if isinstance(part.get("type"), list) else [part.get("type")]
        if "object" in kinds:
            assert part.get("additionalProperties") is False, where
            for prop, item in part["properties"].items():
                nullable = "null" in (item.get("type") if isinstance(item.get("type"), list) else [item.get("type")])
                assert prop in part["required"] or nullable, f"{where}.{prop} is neither required nor nullable"
        if "array" in kinds:
            assert isinstance(part.get("maxItems"), int), f"{where} has no maxItems"


@pytest.mark.parametrize("name", sorted(STAGE_SCHEMAS))
def test_the_form_sent_to_servers_is_strict_and_free_of_grammar_hostile_constraints(name):
    sent = schema_strict(STAGE_SCHEMAS[name])
    for where, part in _walk(sent):
        assert not {"minLength", "maxLength", "pattern"} & set(part), where
        assert not isinstance(part.get("type"), list), f"{where}: nullable values are sent as anyOf"
        if part.get("type") == "object":
            assert part["required"] == list(part["properties"]) and part["additionalProperties"] is False, where


@pytest.mark.parametrize("name", sorted(STAGE_SCHEMAS))
def test_the_form_sent_to_servers_compiles_to_a_grammar(name):
    # llguidance is the JSON-schema-to-grammar compiler llama.cpp and several servers build on.
    grammar = LLMatcher.grammar_from_json_schema(schema_strict(STAGE_SCHEMAS[name]))
    is_error, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    assert not is_error, messages
    assert messages == []
