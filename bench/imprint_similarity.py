"""Can a cosine tell one person's anchors about one matter from their anchors about another? (``memory.imprints``)

Run from the repository root:

    python bench/imprint_similarity.py

Embeds (``ANIMA_EMBEDDINGS``, the bundled local model by default) the passages of a few anchors of one person, in
English and in Chinese: three about one matter (a job interview), three about others (rent, a surgery, a speech
or a thesis), and prints, per language, the range of the cosines between passages about the same matter and
between passages about different ones, and whether the two ranges overlap. Then the same pairs by shared
matter words (``memory.imprints.matter_words``), the rule imprints use.
"""

from __future__ import annotations

import os
import sys
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from anima.core.embeddings import embed_texts  # noqa: E402
from memory.imprints import matter_words  # noqa: E402

# (matter, passage): the first three of each language are about one matter.
ANCHORS = {
    "en": [
        ("interview", "I'm so anxious about my job interview on Friday"),
        ("interview", "I'm still nervous about the interview, what if they ask about my gap year"),
        ("interview", "The interview is tomorrow and I can't stop worrying"),
        ("rent", "I'm anxious about paying the rent this month"),
        ("surgery", "Mom's surgery is next week and I'm scared"),
        ("speech", "I'm so anxious about my sister's wedding speech"),
    ],
    "zh": [
        ("interview", "下周的面试让我很焦虑"),
        ("interview", "面试越来越近了，我还是很紧张"),
        ("interview", "明天就面试了，睡不着"),
        ("rent", "房租这个月又涨了，压力好大"),
        ("surgery", "妈妈下周手术，我好害怕"),
        ("thesis", "论文答辩快到了，我很焦虑"),
    ],
}


def _span(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def main() -> None:
    for language, anchors in ANCHORS.items():
        vectors = embed_texts([text for _, text in anchors], kind="passage")
        same, other = [], []
        words_same, words_other = 0, 0
        for (i, (matter_a, text_a)), (j, (matter_b, text_b)) in combinations(enumerate(anchors), 2):
            cosine = sum(x * y for x, y in zip(vectors[i], vectors[j], strict=True))
            shared = bool(matter_words(text_a) & matter_words(text_b))
            if matter_a == matter_b:
                same.append(cosine)
                words_same += shared
            else:
                other.append(cosine)
                words_other += shared
        overlap = min(same) <= max(other)
        print(
            f"{language}: cosine same matter {_span(same)}, other matters {_span(other)}"
            f" ({'overlapping' if overlap else 'apart'}); shared matter words: same {words_same}/{len(same)} pairs,"
            f" other {words_other}/{len(other)}"
        )


if __name__ == "__main__":
    main()
