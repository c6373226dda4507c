"""The docs' examples run as written: their tagged blocks, on the demo data, against a live runserver.

A block is tagged by an HTML comment on the line before its fence (``<!-- docs-test: NAME -->``), which
the site does not render. Blocks run in bash as a reader would paste them, ``python`` being this
interpreter (first on the PATH, so ``python … &`` and ``$!`` mean what they mean in a shell) and every
``curl`` failing on an HTTP error unless the example prints the status itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from anima.core.config import SCHEMA
from conversations.models import Conversation, Person
from memory.models import MemoryReference, SemanticMemory
from memory.selectors import memory_recall
from tests.served import free_port, runserver, served_env

DOCS = Path(settings.BASE_DIR) / "docs"
# In reading order: the first API session sets the variables the later pages' examples use.
RUN_IN_ORDER = [
    "getting-started.md:cli",
    "getting-started.md:api",
    "concepts.md:belief",
    "api.md:scopes",
    "agents.md:mcp",
    "workspace.md:workspace",
    "workspace.md:imports",
]
TAGGED = re.compile(r"<!-- docs-test: (?P<name>[\w-]+) -->\n```bash\n(?P<body>.*?)```", re.S)
# The addresses the docs give for `python manage.py runserver` and for the MCP server over HTTP; each run takes
# free ports instead, so that two runs on one machine never reach each other's servers.
DOCS_ADDRESS = "127.0.0.1:8000"
DOCS_MCP_PORT = "8001"
PREAMBLE = """set -euo pipefail
curl() { case " $* " in *" -w "*) command curl "$@" ;; *) command curl --fail-with-body "$@" ;; esac; }
"""

needs_curl_and_jq = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq")), reason="the docs' API examples need curl and jq"
)


def tagged_blocks() -> dict[str, str]:
    return {
        f"{page.name}:{match['name']}": match["body"]
        for page in sorted(DOCS.rglob("*.md"))
        for match in TAGGED.finditer(page.read_text(encoding="utf-8"))
    }


def run_blocks(*bodies: str, address: str, bin_dir: Path) -> subprocess.CompletedProcess:
    """Run the blocks as one bash script; whatever it leaves running in the background is stopped afterwards.

    Its output goes to files, not pipes: a server a failed script left behind would hold a pipe open, and the
    test would wait for it until the timeout instead of reporting the failure.
    """
    mcp_port = str(free_port())
    script = PREAMBLE + "\n".join(bodies).replace(DOCS_ADDRESS, address)
    script = script.replace(f"127.0.0.1:{DOCS_MCP_PORT}", f"127.0.0.1:{mcp_port}")
    script = script.replace(f"--port {DOCS_MCP_PORT}", f"--port {mcp_port}")
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").unlink(missing_ok=True)
    (bin_dir / "python").symlink_to(sys.executable)
    with (bin_dir / "stdout").open("w+") as stdout, (bin_dir / "stderr").open("w+") as stderr:
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=settings.BASE_DIR,
            env=served_env(PATH=f"{bin_dir}:{os.environ.get('PATH', '')}"),
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            returncode = process.wait(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(process.args, returncode, stdout.read(), stderr.read())


@needs_curl_and_jq
def test_the_docs_examples_run_as_written_on_the_demo_data_without_teaching_a_leak(
    transactional_db, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    call_command("demo", stdout=io.StringIO())
    blocks = tagged_blocks()
    assert sorted(blocks) == sorted(RUN_IN_ORDER)  # no tagged example goes untested
    demo_conversations = set(Conversation.objects.values_list("pk", flat=True))

    with runserver(log=tmp_path / "runserver.log") as app:
        done = run_blocks(
            *(blocks[name] for name in RUN_IN_ORDER), address=app.url.removeprefix("http://"), bin_dir=tmp_path / "bin"
        )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"

    assert "Maya is allergic to peanuts" in done.stdout  # the CLI tour's recall
    assert re.search(r"1\. \[semantic #\d+\] [\d.]+  Maya works as a nurse", done.stdout)  # a question about herself
    assert "What should I cook tonight?" in done.stdout  # the turn it prepared
    # Belief history: as of the day before the change, the old zodiac sign; today, the new one (the fact, or
    # 小雨's profile, which says it too).
    assert re.search(
        r"1\. \[semantic #\d+\] [\d.]+  Leo 的女儿小雨属羊\n 1\. \[semantic #\d+\] [\d.]+  [^\n]*小雨[^\n]*属虎",
        done.stdout,
    )
    assert '"snippet": "Leo 的女儿小雨属羊"' in done.stdout
    # The agent token bound to Leo reads his memories and is refused Maya's.
    assert '"Leo 的女儿小雨属虎"' in done.stdout
    assert "\n403\n" in done.stdout
    # The same token over MCP (HTTP, the official SDK): Leo's memories, and Maya's refused.
    assert "maya refused: True" in done.stdout and done.stdout.count("小雨属虎") >= 2
    # A workspace exported and imported back into the database it came from writes nothing.
    assert "imported /tmp/anima-workspace: nothing new" in done.stdout
    # The imports: a conversation with its messages and a fact, then found by recall.
    assert "stored 1 conversations, 2 messages" in done.stdout
    assert re.search(r"1\. \[semantic #\d+\] [\d.]+  Maya's favourite tea is fresh mint tea", done.stdout)
    # The session's messages went to the conversation it created, Leo's, not to a demo conversation.
    (created,) = Conversation.objects.exclude(pk__in=demo_conversations).filter(channel="telegram", chat_id="12345678")
    assert created.person.slug == "leo"
    user_message, reply, next_turn = created.messages.order_by("id")  # prepare-turn stores the next user message
    assert "leo@example.com" in user_message.content
    assert (reply.role, next_turn.role) == ("assistant", "user")
    # The memory is Leo's, and the reply cites that memory by the id the API returned.
    memory = SemanticMemory.objects.get(content="Leo 的邮箱是 leo@example.com")
    assert memory.person.slug == "leo"
    assert f"[[anima:{memory.pk}]]" in reply.content
    assert MemoryReference.objects.filter(message=reply, entity_id=memory.pk).exists()
    # Maya's recall never shows it.
    maya = Person.objects.get(slug="maya")
    hits = memory_recall(query="email 邮箱 leo@example.com", person=maya, limit=50)
    assert not [hit for hit in hits if "leo@example.com" in hit["snippet"]]


# An environment variable is read through one of the typed helpers: env_int("NAME", ...).
ENV_READ = re.compile(r"\benv_[a-z_]+\(\s*\"(?P<name>[A-Z][A-Z0-9_]+)\"")
SOURCE_DIRS = ("anima", "conversations", "memory", "sleep", "temporal")


def test_every_environment_variable_anima_reads_is_documented():
    root = Path(settings.BASE_DIR)
    sources = [root / "gunicorn.conf.py", *(path for folder in SOURCE_DIRS for path in (root / folder).rglob("*.py"))]
    read = {match["name"] for path in sources for match in ENV_READ.finditer(path.read_text(encoding="utf-8"))}
    docs = "\n".join(page.read_text(encoding="utf-8") for page in DOCS.rglob("*.md"))
    assert len(read) > 30  # the pattern still finds the helpers' calls
    assert sorted(name for name in read if f"`{name}`" not in docs) == []


def test_every_runtime_setting_is_in_the_configuration_reference_with_its_default():
    reference = (DOCS / "configuration.md").read_text(encoding="utf-8")
    rows = {
        (section, key): default
        for section, key, default in re.findall(r"^\| `([\w.]+)` \| `(\w+)` \| `([^`]*)` \|", reference, re.M)
    }
    expected = {
        (section, key): json.dumps(field.default, ensure_ascii=False)
        for section, fields in SCHEMA.items()
        for key, field in fields.items()
    }
    assert rows == expected


def test_the_readme_is_a_front_door_with_the_two_commands_and_links_that_resolve():
    readme = (Path(settings.BASE_DIR) / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "pip install -r requirements.txt && python manage.py demo" in readme
    assert "pip install -r requirements.txt && pytest" in readme
    targets = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert targets  # it points into the docs
    assert [target for target in targets if not (Path(settings.BASE_DIR) / target).exists()] == []
