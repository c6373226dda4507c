"""JSON as PostgreSQL can store it: bounded nesting, no NUL characters and no lone surrogates.

Every JSON text that enters Anima (API bodies, JSONL import lines, workspace files) is read by
``json_loads`` here, so a deeply nested value is refused with the path at fault instead of
raising RecursionError somewhere further down (Python's decoder, ``json.dumps`` or a walk).
"""

from __future__ import annotations

import json
import re
from typing import Any

from anima.core.errors import AnimaError

# Deeper than any tool payload or memory body needs, far below Python's recursion limit.
MAX_DEPTH = 64
# JSON may escape a NUL (\u0000) or half a surrogate pair (\ud800); UTF-8 text and JSONB can store neither.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# An error names the top-level field and shows this much of the path below it.
SHOWN_PATH_PARTS = 4
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]', re.DOTALL)


class JsonValueError(AnimaError):
    """JSON that cannot be stored; ``field`` is the path at fault (``tool_payload.0.a``)."""


def unstorable(text: str) -> bool:
    """True when ``text`` holds a NUL character or a lone surrogate."""
    return _UNSTORABLE.search(text) is not None


def storable(text: str) -> str:
    """``text`` with each NUL character or lone surrogate replaced by U+FFFD (for logs and audit rows)."""
    return _UNSTORABLE.sub("\ufffd", text)


def unstorable_paths(value: Any, path: str = "") -> list[str]:
    """Paths (``items.2.title``) of every key or string holding a NUL character or a lone surrogate."""
    if isinstance(value, str):
        return [path or "body"] if unstorable(value) else []
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            # The path names the field in an error message, which must itself be encodable.
            label = storable(str(key))
            child = f"{path}.{label}" if path else label
            if unstorable(str(key)):
                found.append(child)
            found.extend(unstorable_paths(item, child))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(unstorable_paths(item, f"{path}.{index}" if path else str(index)))
    return found


def too_deep_path(value: Any, *, limit: int = MAX_DEPTH) -> str | None:
    """The path of the first container nested deeper than ``limit`` levels ("" for the top), or None."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            children = [(child, f"{path}.{key}" if path else str(key)) for key, child in item.items()]
        elif isinstance(item, list):
            children = [(child, f"{path}.{index}" if path else str(index)) for index, child in enumerate(item)]
        else:
            continue
        if depth > limit:
            return path
        stack.extend((child, child_path, depth + 1) for child, child_path in reversed(children))
    return None


def _too_deep_in_text(text: str, *, limit: int) -> str:
    """Where ``text`` first nests deeper than ``limit``, found by scanning tokens (it cannot be decoded)."""
    path: list[str | int] = []
    kinds: list[str] = []
    last_string = ""
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token.startswith('"'):
            last_string = token
        elif token == ":" and kinds and kinds[-1] == "{":
            try:
                path[-1] = json.loads(last_string)
            except ValueError:
                path[-1] = last_string.strip('"')
        elif token == "," and kinds and kinds[-1] == "[":
            path[-1] = int(path[-1]) + 1
        elif token in "{[":
            if len(kinds) >= limit:
                break
            kinds.append(token)
            path.append(0 if token == "[" else "")
        elif token in "}]" and kinds:
            kinds.pop()
            path.pop()
    return ".".join(str(part) for part in path)


def json_loads(text: str, *, where: str = "body", limit: int = MAX_DEPTH, **options: Any) -> Any:
    """Decode ``text`` (``options`` go to ``json.loads``).

    Nesting deeper than ``limit`` raises JsonValueError whose ``field`` is the top-level field at fault
    (``where`` when the top level itself is too deep). Malformed JSON raises ValueError (JSONDecodeError)
    as ``json.loads`` does.
    """
    try:
        value = json.loads(text, **options)
    except RecursionError:
        path = _too_deep_in_text(text, limit=limit)
    else:
        path = too_deep_path(value, limit=limit)
        if path is None:
            return value
    parts = path.split(".") if path else []
    shown = ".".join(parts[:SHOWN_PATH_PARTS]) + ("…" if len(parts) > SHOWN_PATH_PARTS else "")
    raise JsonValueError(
        f"{shown or where}: JSON nested deeper than {limit} levels", field=parts[0] if parts else where
    )
