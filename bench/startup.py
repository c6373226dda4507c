"""Start-up cost of a management command: ``python manage.py help`` against a stock Django project's.

Run from the repository root:

    python bench/startup.py [--repeat 9]

Each round runs, in fresh interpreters and interleaved (a load spike hits all three alike): the bare
interpreter (``python -c pass``), the floor — ``help`` of a Django project with only Django's own contrib
apps, configured in the same interpreter, same Django — and Anima's ``manage.py help``, which sets up every
app, the admin and the Celery app (no database connection). Reported: median and best wall time of each,
and Anima's median over the floor's. The target is under 2 s on an idle two-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

STOCK_HELP = """
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=[
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
])
django.setup()
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", "help"])
"""

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "stock Django help": [sys.executable, "-c", STOCK_HELP],
    "manage.py help": [sys.executable, "manage.py", "help"],
}


def seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    for command in COMMANDS.values():  # warm the OS's file cache and the .pyc files first
        seconds(command, env)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            times[name].append(seconds(command, env))
    for name, measured in times.items():
        print(f"{name:<20} median {statistics.median(measured):6.3f} s   best {min(measured):6.3f} s")
    ratio = statistics.median(times["manage.py help"]) / statistics.median(times["stock Django help"])
    print(f"manage.py help / stock Django help: {ratio:.2f}x (medians of {args.repeat} runs)")


if __name__ == "__main__":
    main()
