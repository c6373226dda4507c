"""What the workspace tests share: a populated database, an emptied one, the files of a workspace."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pgtrigger
from hypothesis import strategies as st

from anima.core.models import Entity, MemoryStatus, MemoryType
from conversations.models import HistoryEntry, Identity, Person
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.services import memory_remember
from tests.factories import HistoryEntryFactory, IdentityFactory, PersonFactory, SelfLayerBlockFactory


def workspace_files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def database_empty() -> None:
    with pgtrigger.ignore("conversations.HistoryEntry:history_entries_append_only"):
        HistoryEntry.objects.all().delete()
    Entity.objects.all().delete()
    Identity.objects.all().delete()
    Person.objects.all().delete()
    SelfLayerBlock.objects.all().delete()


def workspace_populate() -> None:
    leo = PersonFactory(slug="leo", display_name="Leo / 主人")
    IdentityFactory(person=leo, channel="telegram", external_id="12345678")
    IdentityFactory(person=leo, channel="wechat_work", external_id="a/b c")
    PersonFactory(slug="yes", display_name='quote " and \\ backslash')
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="我是 Anima", locked=True)
    SelfLayerBlockFactory(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, content="## Turning points\n- 搬到杭州")
    memory_remember(content="喜欢 Python", memory_type=MemoryType.PREFERENCE, person=leo)
    memory_remember(content="multi-line fact\n\nwith a gap\n  and indent", person=leo, pinned=True)
    memory_remember(content="在 Telegram 上用语音", person=leo, source_channel="wechat_work", source_id="a/b c")
    memory_remember(content="Short answers please", memory_type=MemoryType.PREFERENCE)
    memory_remember(content="杭州的冬天很冷")
    retired, _ = memory_remember(content="an old belief")
    SemanticMemory.objects.filter(pk=retired.pk).update(status=MemoryStatus.DEPRECATED)
    HistoryEntryFactory(
        person=None, channel="cli", content="第一次部署", timestamp=dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
    )
    HistoryEntryFactory(
        person=leo, channel="", content='said "hi"\nthen left', timestamp=dt.datetime(2026, 10, 2, tzinfo=dt.UTC)
    )


ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=60)
