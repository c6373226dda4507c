import pytest
from memory.embedding import embed_backfill_run
from memory.search import search_text_plain
from memory.selectors import memory_semantic_search
from tests.factories import PersonFactory, SemanticMemoryFactory
from tests.memory.test_recall_gate import MEMORIES

@pytest.mark.local_embeddings
def test_debug():
    person = PersonFactory(slug="maya")
    for content in MEMORIES + ("Maya's grandmother had knee surgery last month", "Maya 的外婆上个月做了膝盖手术"):
        SemanticMemoryFactory(person=person, content=content)
    embed_backfill_run()
    for q in ["How is your grandmother doing since her knee surgery?\nMuch better, she walks on her own again!", "Is your grandmother's knee better since the surgery last month?\nMuch better, she walks on her own again!", "How is your grandmother's knee since the surgery?\nMuch better, she walks on her own again!", "Much better, she walks on her own again!", "你外婆的膝盖手术恢复得怎么样？\n好多了，已经能自己走路了！", "My cat Miso has been sneezing all week, I'm worried about her\nPoor Miso! Is she still eating? If the sneezing goes on, a vet should see her.\nthanks a lot"]:
        hits = memory_semantic_search(query=search_text_plain(q), limit=5, person=person, global_only=True, keyword_gate=True)
        print("Q", q.replace("\n", " / "))
        for h in hits: print("  ", round(h["score"], 3), h["snippet"][:50], h["scores"])
