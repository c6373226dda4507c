"""Subjects of a person's memories (the person, relatives, pets, places) and their observation profiles.

``selectors`` reads them; ``services`` writes them (the nightly ``subjects`` step builds them, forgetting
reaches them). A profile is a semantic memory of type ``observation`` whose body holds, under
``PROFILE_KEY``, the line it wrote for each fact it summarises, and under ``source_facts`` those facts' ids.
"""

PROFILE_KEY = "profile"
SOURCE_FACTS_KEY = "source_facts"
SELF_KEY = "self"
# The branch recall's hits carry (``ranks``, ``scores``) when a subject the query names brought them.
ENTITY_BRANCH = "entity"
