"""Person-memory workspace interop: the SOUL.md / USER.md / memory/ file layout agents keep.

::

    SOUL.md                         self-layer blocks, one ``## <key>`` section each (see below)
    USER.md                         global ``preference`` memories (what the user wants)
    memory/MEMORY.md                every other global semantic memory, by type
    memory/history.jsonl            global timeline, nanobot's record (see below)
    memory/.cursor                  the last cursor of memory/history.jsonl
    memory/identity_map.yaml        persons, display names and their channel ids
    memory/persons/<p>/MEMORY.md    the person's memories
    memory/persons/<p>/history.jsonl
    memory/persons/<p>/sources/<channel>_<id>.md   memories tied to one channel account

The root files and ``memory/history.jsonl`` are the ones nanobot's ``MemoryStore`` keeps (followed
here: nanobot-ai 0.3.5). A history line is nanobot's record ``{"cursor", "timestamp", "content",
"session_key"?}``: the timestamp is ``YYYY-MM-DD HH:MM`` in local time (ANIMA_TIME_ZONE, or the time
zone given), the session key ``<channel>:<chat id>`` (``telegram:12345678``) or just the channel,
left out when there is none. On import a global record stays global, its session key kept whole
(``telegram:-100123:topic:42`` too) and written back as it came; when the key's channel account
belongs to a person (by the identity map, the workspace's or the database's) the person's history also
gets a copy, as nanobot's person-memory sidecar does. Entries are read in cursor order. nanobot's legacy
``memory/HISTORY.md`` (``[YYYY-MM-DD HH:MM] text`` paragraphs) is read when ``history.jsonl`` is
missing or empty, as nanobot migrates it.

``SOUL.md`` holds one version of each block (the companion's language's, else another's); a block is
imported as the version in the language it is written in. What precedes the first block (nanobot's own
persona: free-form Markdown) is not Anima's to place: it is kept verbatim and exported again in front of
the blocks that hold text, so nanobot's file comes back as it was.

Memory files are Markdown lists under ``## <memory_type>`` headings; an item is ``- text``
(``- [pinned] text`` when pinned), further lines of one memory are indented two spaces. A text
whose first line starts with ``[pinned] `` or ``\\`` is written with a ``\\`` in front, and so is a
line of a self-layer block that reads as a block heading (``## direction``) or starts with ``\\``;
import removes that one ``\\``. A source note whose name would be too long for a file system is
named ``<channel>_+<hash>.md`` and its first line (``# <channel>:<id>``, percent-escaped) names the
account.

Only active memories are exported; ids and creation times stay out, so exporting, importing into an
empty database and exporting again gives byte-identical files. Export writes every file into a
staging directory first and then moves them into place, so a failure leaves the target as it was.
Import is idempotent (a fact the person already holds, compared as ``memory_remember`` compares,
whatever its type or channel, or a history entry already there, as many times as the files hold
it, is not written again: an export imported into the database it came from writes nothing) and
all-or-nothing: every file is checked first, and any problem is reported as
``file:line: message`` before anything is written. What Anima does not understand but can skip (an
unknown history field, a heading that is not a memory type, prose between list items, a link leading
out of the workspace, never followed) is a warning with its line, never a failed import.
"""

from memory.workspace._export import workspace_export
from memory.workspace._import import workspace_import
from memory.workspace._layout import HISTORY_KEYS, WorkspaceError, WorkspaceImport, session_key_parse, source_filename

__all__ = [
    "HISTORY_KEYS",
    "WorkspaceError",
    "WorkspaceImport",
    "session_key_parse",
    "source_filename",
    "workspace_export",
    "workspace_import",
]
