"""``manage.py`` as a shell pipeline runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_reader_that_stops_early_gets_no_traceback():
    # `recall … | head -3`: the reader closes the pipe before the command has written everything.
    process = subprocess.Popen(
        [sys.executable, "manage.py", "help"],
        cwd=REPO,
        env=os.environ | {"DJANGO_SETTINGS_MODULE": "anima.settings"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    errors = process.stderr.read().decode()
    process.wait(timeout=120)

    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors
    # It stopped early, as a command that could not write its output.
    assert process.returncode == 1
