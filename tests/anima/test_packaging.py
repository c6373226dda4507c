"""The dependency files agree: production's lock holds no tool, the dev lock runs the same runtime, all hashed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "requirements"

# Installed for the tests, the linters and the docs site only: production must not carry them.
TOOLS = {"pytest", "pytest-django", "factory-boy", "hypothesis", "rank-bm25", "ruff", "import-linter", "selenium"}
TOOLS |= {"schemathesis", "mkdocs-material", "pip-tools"}

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def _pins(path: Path) -> dict[str, str]:
    """Package name (normalised) to its pinned version, for each requirement line of ``path``."""
    pins = {}
    for line in path.read_text().splitlines():
        if match := _PIN.match(line):
            pins[_name(match[1])] = match[2]
    return pins


def _locked(path: Path) -> dict[str, list[str]]:
    """Each requirement of a lock file with the hashes given for it."""
    locked: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=\S)", path.read_text()):
        if match := _PIN.match(block):
            locked[_name(match[1])] = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
    return locked


def test_requirements_txt_installs_the_dev_lock_and_repeats_only_its_pins():
    text = (REPO / "requirements.txt").read_text()
    assert "\n-r requirements/dev.txt\n" in f"\n{text}"
    repeated, dev = _locked(REPO / "requirements.txt"), _locked(REQUIREMENTS / "dev.txt")
    assert repeated, "urllib3 pinned beside the lock, for the pip of a fresh Python 3.11 venv"
    assert {name: (_pins(REPO / "requirements.txt")[name], sorted(hashes)) for name, hashes in repeated.items()} == {
        name: (_pins(REQUIREMENTS / "dev.txt")[name], sorted(dev[name])) for name in repeated
    }


def test_every_locked_requirement_has_hashes():
    for lock in ("runtime.txt", "dev.txt"):
        unhashed = [name for name, hashes in _locked(REQUIREMENTS / lock).items() if not hashes]
        assert unhashed == [], lock


def test_production_installs_no_test_lint_or_docs_tool():
    assert sorted(TOOLS & set(_locked(REQUIREMENTS / "runtime.txt"))) == []
    assert sorted(TOOLS - set(_pins(REQUIREMENTS / "dev.in"))) == []


def test_both_locks_hold_every_declared_pin_and_agree_on_the_runtime():
    runtime, dev = _pins(REQUIREMENTS / "runtime.txt"), _pins(REQUIREMENTS / "dev.txt")
    for declared, lock in ((_pins(REQUIREMENTS / "runtime.in"), runtime), (_pins(REQUIREMENTS / "dev.in"), dev)):
        assert {name: lock.get(name) for name in declared} == declared
    assert {name: dev.get(name) for name in runtime} == runtime


def test_the_project_version_is_the_changelogs_latest_release():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert released, "CHANGELOG.md has a released version"
    assert project["version"] == released[0]
