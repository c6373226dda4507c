"""Import: a parsed workspace into the database, idempotent and all-or-nothing."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from anima.core.calendar import local_day, moment_iso
from anima.core.forgotten import HISTORY as FORGOTTEN_HISTORY
from anima.core.forgotten import (
    IDENTITY,
    PERSON,
    forgotten_account,
    forgotten_among,
    forgotten_excerpt,
    forgotten_fingerprint,
)
from anima.core.forgotten import MEMORY as FORGOTTEN_MEMORY
from anima.core.text import is_chinese
from conversations.models import HistoryEntry, Identity, Language, Person
from conversations.services import history_append, identity_map, person_ensure
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory, WorkspaceText
from memory.selectors import active_semantic_memories
from memory.services import memory_create, memory_pin, same_content_key
from memory.workspace._layout import (
    HISTORY,
    IDENTITY_MAP,
    PERSONS,
    SOUL,
    SOUL_TITLE,
    WorkspaceError,
    WorkspaceImport,
    _Findings,
    _HistoryItem,
    _MemoryItem,
    _PersonFiles,
    _Workspace,
)
from memory.workspace._parse import _workspace_parse


def _route_history(workspace: _Workspace, findings: _Findings) -> None:
    """Copy each global entry whose session account belongs to a person into that person's history, as nanobot's
    person-memory sidecar does; the global timeline keeps it where nanobot put it. A copy the person's own file
    already holds (an export of both) is not made twice.

    An account belongs to whom the workspace's identity map says, else the database's identities.
    A person's own entry may not name someone else's account.
    """
    owners = {
        (channel, external_id): slug
        for channel, external_id, slug in Identity.objects.values_list("channel", "external_id", "person__slug")
    }
    for slug, files in workspace.persons.items():
        for account in files.ids:
            owners[account] = slug
    unmapped: set[tuple[str, str]] = set()
    held = {slug: Counter(map(_history_key, files.history)) for slug, files in workspace.persons.items()}
    for item in workspace.history:
        owner = owners.get((item.channel, item.chat_id)) if item.chat_id else None
        if owner is not None:
            theirs = held.setdefault(owner, Counter())
            if theirs[_history_key(item)] > 0:
                theirs[_history_key(item)] -= 1
            else:
                workspace.persons.setdefault(owner, _PersonFiles()).history.append(replace(item))
            continue
        if item.chat_id and (item.channel, item.chat_id) not in unmapped:
            unmapped.add((item.channel, item.chat_id))
            findings.warn(
                item.name,
                item.line,
                f"session {item.channel}:{item.chat_id} is not mapped to a person; its entries are global history only",
            )
    for slug, files in workspace.persons.items():
        for item in files.history:
            owner = owners.get((item.channel, item.chat_id)) if item.chat_id else None
            if owner is not None and owner != slug and item.name != HISTORY:
                findings.error(item.name, item.line, f"session {item.channel}:{item.chat_id} belongs to {owner}")
        files.history.sort(key=lambda item: (item.name != HISTORY, item.cursor, item.line))


# --- Import ---------------------------------------------------------------------------------------


def workspace_import(
    *, root: Path, force: bool = False, tz: tzinfo | None = None, allow_forgotten: bool = False
) -> WorkspaceImport:
    """Import the workspace under ``root`` (idempotent, all-or-nothing); returns what was created and the warnings.

    Naive timestamps are read in ``tz`` (default ANIMA_TIME_ZONE). A locked self-layer block
    (existence_anchor) that already has different content is kept unless ``force``. What a forget
    took (a person erased, a memory or history entry forgotten) is skipped with a warning naming it,
    unless ``allow_forgotten``. Raises WorkspaceError naming file and line of every problem.
    """
    findings = _Findings()
    workspace = _workspace_parse(root, findings, tz or timezone.get_current_timezone())
    if not findings.errors:
        _route_history(workspace, findings)
    if findings.errors:
        raise WorkspaceError(findings.errors)
    _forgotten_drop(workspace, findings, allow=allow_forgotten)
    result = WorkspaceImport(warnings=findings.warnings)
    counts = result.counts
    with transaction.atomic():
        _import_soul(workspace.soul, counts, force=force)
        if workspace.soul_preamble is not None:
            _keep_verbatim(SOUL, workspace.soul_preamble, counts)
        _import_memories(workspace.memories, person=None, counts=counts, held=_memories_held(person=None))
        _import_history(workspace.history, person=None, counts=counts)
        for slug, files in workspace.persons.items():
            person = person_ensure(slug=slug, display_name=files.display_name)
            for channel, external_id in files.ids:
                if not Identity.objects.filter(channel=channel, external_id=external_id, person=person).exists():
                    identity_map(channel=channel, external_id=external_id, person_slug=slug)
                    counts["identities"] += 1
            held = _memories_held(person=person)
            _import_memories(files.memories, person=person, counts=counts, held=held)
            for source, items in files.sources.items():
                _import_memories(items, person=person, counts=counts, held=held, source=source)
            _import_history(files.history, person=person, counts=counts)
    return result


def _forgotten_drop(workspace: _Workspace, findings: _Findings, *, allow: bool) -> None:
    """Leave out what a forget took, matched by the tombstones' fingerprints, each with a warning naming it:
    a workspace exported before an erasure must not undo it. With ``allow`` it is imported, still named."""
    persons = workspace.persons
    candidates = {_fingerprint(PERSON, slug) for slug in persons}
    for files in persons.values():
        candidates.update(_fingerprint(IDENTITY, _account(*account)) for account in files.ids)
        candidates.update(_fingerprint(FORGOTTEN_MEMORY, item.content) for item in _all_memories(files))
        candidates.update(_fingerprint(FORGOTTEN_HISTORY, item.content) for item in files.history)
    candidates.update(_fingerprint(FORGOTTEN_MEMORY, item.content) for item in workspace.memories)
    candidates.update(_fingerprint(FORGOTTEN_HISTORY, item.content) for item in workspace.history)
    forgotten = forgotten_among(fingerprints=candidates)
    if not forgotten:
        return
    outcome = "imported anyway (--allow-forgotten)" if allow else "not imported"

    def kept(items: list, kind: str, what: str) -> list:
        left = []
        for item in items:
            if _fingerprint(kind, item.content) in forgotten:
                named = f"{what} {forgotten_excerpt(item.content)}"
                findings.warn(item.name, item.line, f"{named} was forgotten; {outcome}")
                if not allow:
                    continue
            left.append(item)
        return left

    for slug, files in list(persons.items()):
        if _fingerprint(PERSON, slug) in forgotten:
            memories = sum(1 for _ in _all_memories(files))
            findings.warnings.append(
                f"{PERSONS}/{slug}/: person {slug} was erased; {outcome}: their {memories} memories, "
                f"{len(files.history)} history entries and {len(files.ids)} accounts"
            )
            if not allow:
                del persons[slug]
            continue
        for account in files.ids:
            if _fingerprint(IDENTITY, _account(*account)) in forgotten:
                findings.warn(IDENTITY_MAP, 1, f"account {account[0]}:{account[1]} of {slug} was erased; {outcome}")
        if not allow:
            files.ids = [a for a in files.ids if _fingerprint(IDENTITY, _account(*a)) not in forgotten]
        files.memories = kept(files.memories, FORGOTTEN_MEMORY, "memory")
        files.sources = {source: kept(items, FORGOTTEN_MEMORY, "memory") for source, items in files.sources.items()}
        files.history = kept(files.history, FORGOTTEN_HISTORY, "history entry")
    workspace.memories = kept(workspace.memories, FORGOTTEN_MEMORY, "memory")
    workspace.history = kept(workspace.history, FORGOTTEN_HISTORY, "history entry")


def _fingerprint(kind: str, text: str) -> str:
    return forgotten_fingerprint(kind=kind, text=text)


def _account(channel: str, external_id: str) -> str:
    return forgotten_account(channel=channel, external_id=external_id)


def _all_memories(files: _PersonFiles):
    yield from files.memories
    for items in files.sources.values():
        yield from items


def _import_soul(blocks: dict[str, str], counts: Counter, *, force: bool) -> None:
    """Each block as the version in the language it is written in. A block that changes takes the other languages'
    versions with it: they said what the old one said, and the nightly step writes them again from the new one."""
    for key, content in blocks.items():
        language = Language.ZH if is_chinese(content) else Language.EN
        versions = {block.language: block for block in SelfLayerBlock.objects.filter(key=key)}
        held = versions.get(language)
        if held is not None and held.content == content:
            continue
        if held is None and not content and not any(block.content for block in versions.values()):
            continue
        if any(block.locked and block.content for block in versions.values()) and not force:
            counts["self_blocks_locked_kept"] += 1
            continue
        locked = key == SelfBlock.EXISTENCE_ANCHOR or any(block.locked for block in versions.values())
        SelfLayerBlock.objects.filter(key=key).exclude(language=language).delete()
        SelfLayerBlock.objects.update_or_create(
            key=key, language=language, defaults={"content": content, "locked": held.locked if held else locked}
        )
        counts["self_blocks"] += 1


def _keep_verbatim(path: str, text: str, counts: Counter) -> None:
    """Keep what ``path`` holds that Anima cannot place, as written: the file's state (Anima's own title, or nothing,
    is nothing to keep)."""
    held = WorkspaceText.objects.filter(path=path).first()
    if text in ("", SOUL_TITLE.rstrip("\n"), SOUL_TITLE):
        if held is not None:
            held.delete()
            counts["texts_kept_as_written"] += 1
        return
    if held is None or held.content != text:
        WorkspaceText.objects.update_or_create(path=path, defaults={"content": text})
        counts["texts_kept_as_written"] += 1


def _memories_held(*, person: Person | None) -> dict[str, list[SemanticMemory]]:
    """``person``'s active memories (the global ones for None) by what counts as the same fact, oldest first."""
    held: dict[str, list[SemanticMemory]] = {}
    for memory in active_semantic_memories().filter(person=person).only("id", "content", "pinned").order_by("id"):
        held.setdefault(same_content_key(memory.content), []).append(memory)
    return held


def _import_memories(
    items: list[_MemoryItem],
    *,
    person: Person | None,
    counts: Counter,
    held: dict[str, list[SemanticMemory]],
    source: tuple[str, str] | None = None,
) -> None:
    """Write the memories ``person`` does not hold yet, as many times as the files hold each.

    A memory is already there when the person holds the same fact (``same_content_key``, as
    ``memory_remember`` compares: "Leo likes tea." is "leo likes tea"), whatever its type, channel
    or source note: an export records no channel for a fact sleep extracted, so re-importing it
    must still find it. Each memory held answers one item of the files (``held`` is shared by all
    of a person's files and used up), so "LEO LIKES  TEA" beside "Leo likes tea" in the files are
    two memories, as exported from two.
    """
    channel, source_id = source or ("", "")
    now = timezone.now()
    for item in items:
        same = held.get(same_content_key(item.content))
        if same:
            # A pinned item takes a pinned copy (or pins one); an unpinned item leaves pinned copies to pinned items.
            memory = next((m for m in same if m.pinned == item.pinned), same[0])
            same.remove(memory)
            if item.pinned and not memory.pinned:
                memory_pin(memory=memory)
            continue
        body: dict[str, Any] = {"observed_at": moment_iso(now)}
        if source_id:
            body["source_id"] = source_id
        memory_create(
            content=item.content,
            memory_type=item.memory_type,
            person=person,
            pinned=item.pinned,
            source_channel=channel,
            source_day=local_day(now),
            body=body,
            created_at=now,
        )
        counts["memories"] += 1


def _minute(moment: datetime) -> datetime:
    # In UTC: an old local offset such as Shanghai's +08:05:43 would floor a local minute to other seconds.
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _history_key(item: _HistoryItem) -> tuple[datetime, str, str]:
    """What makes two history entries the same one: minute, text and channel."""
    return (_minute(item.timestamp), item.content, item.channel)


def _import_history(items: list[_HistoryItem], *, person: Person | None, counts: Counter) -> None:
    """Append the entries the database does not hold yet (same minute, text and channel), as many as the file has."""
    if not items:
        return
    start = min(_minute(item.timestamp) for item in items)
    end = max(_minute(item.timestamp) for item in items) + timedelta(minutes=1)
    existing = Counter(
        (_minute(timestamp), content, channel)
        for timestamp, content, channel in HistoryEntry.objects.filter(
            person=person, timestamp__gte=start, timestamp__lt=end
        ).values_list("timestamp", "content", "channel")
    )
    for item in items:
        key = _history_key(item)
        if existing[key] > 0:
            existing[key] -= 1
            continue
        history_append(
            content=item.content,
            timestamp=item.timestamp,
            channel=item.channel,
            person=person,
            session_key=item.session_key,
        )
        counts["history"] += 1
