"""The fences' sidecar, ``<channel>/_fences.json`` (docs/folder.md): the fencing tokens of a
channel's tasks and path locks, which the reference's records have no key for.

The reference ignores it (its readers take only ``<digits>-*.md`` messages, ``_meta.json``
and the record folders from a channel folder), so the records stay byte-exact. Written only
when some fence is above 0 (a folder of a database that never handed one out is the same as
before)::

    {
      "lock_fence": 7,
      "locks": {"<lock_id>": 7},
      "tasks": {"T1": 3}
    }

``lock_fence`` is the channel's last lock fence (``LockFence``), which outlives the locks; an
import restores all three, never lowering a fence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import FENCE_MAX

FENCES_FILE = "_fences.json"
CODE = "IMPORT_INVALID_FENCES"
# The largest fence a sidecar may hold: a tenth of the largest a client may send (FENCE_MAX),
# so that every claim and lock after an import can still take the next fence and send it back
# (a sidecar at 2^63-1 made every later claim a 500). A database reaches it only by 10^17
# claims, or by an import near it.
IMPORT_FENCE_MAX = (FENCE_MAX + 1) // 10


@dataclass
class Fences:
    tasks: dict[str, int] = field(default_factory=dict)
    locks: dict[str, int] = field(default_factory=dict)
    lock_fence: int = 0

    def any(self) -> bool:
        return bool(self.lock_fence or any(self.tasks.values()) or any(self.locks.values()))


def fences_bytes(fences: Fences) -> bytes | None:
    """The sidecar's bytes (keys sorted, indent 2, a final newline); None when no fence was
    ever handed out."""
    if not fences.any():
        return None
    record = {
        "lock_fence": fences.lock_fence,
        "locks": {key: value for key, value in sorted(fences.locks.items()) if value},
        "tasks": {key: value for key, value in sorted(fences.tasks.items()) if value},
    }
    return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _fence(value: object, where: str, key: str) -> int:
    if type(value) is not int or not 0 <= value <= IMPORT_FENCE_MAX:
        raise AppError(
            CODE,
            f"{where}: {key} must be an integer from 0 to {IMPORT_FENCE_MAX}",
            detail={"file": where},
        )
    return value


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, int]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise AppError(CODE, f"{where}: {key} must be an object", detail={"file": where})
    return {str(name): _fence(value, where, f"{key}.{name}") for name, value in table.items()}


def fences_parse(data: Any, *, where: str) -> Fences:
    """The sidecar as ``json_record`` read it. Unknown keys are refused, as in every record.
    Raises IMPORT_INVALID_FENCES."""
    if not isinstance(data, dict):
        raise AppError(CODE, f"{where}: not a JSON object", detail={"file": where})
    unknown = set(data) - {"lock_fence", "locks", "tasks"}
    if unknown:
        raise AppError(CODE, f"{where}: unknown key {sorted(unknown)[0]!r}", detail={"file": where})
    return Fences(
        tasks=_table(data, "tasks", where),
        locks=_table(data, "locks", where),
        lock_fence=_fence(data.get("lock_fence", 0), where, "lock_fence"),
    )
