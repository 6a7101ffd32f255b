"""The roof reads through the walls: the modules of ``agentchat`` above the floor (the folder
sync and import, the dashboard, the state summary, the views, the commands) reach the apps'
tables only through the apps' selectors and services (``channels_app.selectors``,
``tasks_app.selectors``, ``locks_app.selectors``, ``agentchat.core.identity.selectors``…), so that
the rules those keep (who sees a members-only channel, how a task is loaded) have one home.

Parsed with ``ast``, not grepped: any attribute ``objects``, ``_default_manager`` or
``_base_manager`` in a roof module fails, whatever it is called on. The one exception is the
roof's own tables (the models of the ``agentchat`` app, ``agentchat/models.py``): the state
package owns them and reads and writes them itself, by their class names.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from tests.conftest import ROOT

ROOF = ROOT / "agentchat"
# Below the roof, or not Django's: the floor owns its own tables, migrations must use the
# historical models they are given, the client has no database.
NOT_ROOF = ("core", "migrations", "client")
MANAGERS = {"objects", "_default_manager", "_base_manager"}
# The package that owns the agentchat app's tables (StateSnapshot and the like).
OWNER = "state"
# (module path, line text) pairs that truly cannot go through a selector, each with its reason.
# Empty: every read and write of the roof has one.
ALLOWED: dict[tuple[str, str], str] = {}


def roof_modules() -> list[Path]:
    return sorted(
        path for path in ROOF.rglob("*.py") if path.relative_to(ROOF).parts[0] not in NOT_ROOF
    )


def own_models() -> set[str]:
    return {model.__name__ for model in apps.get_app_config("agentchat").get_models()}


def manager_uses(source: str, *, owner: bool, own: set[str]) -> list[tuple[int, str]]:
    """(line, expression) of each manager access in ``source`` that the rule forbids."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or node.attr not in MANAGERS:
            continue
        base = node.value
        if owner and isinstance(base, ast.Name) and base.id in own:
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


def test_roof_modules_are_found() -> None:
    names = {path.relative_to(ROOF).as_posix() for path in roof_modules()}
    assert {"folder/sync.py", "dashboard/views.py", "state/selectors.py", "views.py"} <= names
    assert not any(name.startswith(("core/", "migrations/")) for name in names)


def test_the_roof_queries_no_table_directly() -> None:
    own = own_models()
    assert "StateSnapshot" in own
    offences = []
    for path in roof_modules():
        rel = path.relative_to(ROOF)
        source = path.read_text()
        lines = source.splitlines()
        for line, expression in manager_uses(source, owner=rel.parts[0] == OWNER, own=own):
            text = lines[line - 1].strip()
            if (rel.as_posix(), text) not in ALLOWED:
                offences.append(f"agentchat/{rel.as_posix()}:{line}: {expression}")
    assert not offences, (
        "the roof reads the apps' tables through their selectors and writes through their "
        "services; add one there instead of:\n" + "\n".join(sorted(offences))
    )


@pytest.mark.parametrize(
    ("source", "owner", "expected"),
    [
        ("Message.objects.filter(seq=1)", False, ["Message.objects"]),
        ("rows = Task._default_manager.all()", False, ["Task._default_manager"]),
        ("x = model._base_manager", True, ["model._base_manager"]),
        ("a.b.objects.first()", False, ["a.b.objects"]),
        # The owner package may use its own models, and only those.
        ("StateSnapshot.objects.create()", True, []),
        ("StateSnapshot.objects.create()", False, ["StateSnapshot.objects"]),
        ("Channel.objects.select_for_update()", True, ["Channel.objects"]),
        # Reading through a selector, or a field named like a manager elsewhere, is fine.
        ("channel_find(name).objects_count", False, []),
        ("messages_after(channel=c, after=0)", False, []),
    ],
)
def test_the_guard_sees_manager_uses(source: str, owner: bool, expected: list[str]) -> None:
    found = manager_uses(source, owner=owner, own={"StateSnapshot"})
    assert [expression for _, expression in found] == expected


@pytest.mark.django_db
def test_message_iter_after_bounds(make_agent: Any) -> None:
    """The one stream of a channel's messages the roof reads (the sync, the state fold)."""
    from channels_app.selectors import message_iter_after
    from channels_app.services import channel_create, message_post

    make_agent("ann")
    channel = channel_create(name="walls", created_by="ann")
    for n in range(6):
        message_post(channel=channel, sender="ann", title=f"m{n}", body="")

    def seqs(**kwargs: Any) -> list[int]:
        return [m.seq for m in message_iter_after(channel=channel, chunk_size=2, **kwargs)]

    assert seqs(after=0) == [1, 2, 3, 4, 5, 6]
    assert seqs(after=2, upto=5) == [3, 4, 5]
    assert seqs(after=1, limit=3) == [2, 3, 4]
    assert seqs(after=6) == []
