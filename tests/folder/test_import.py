"""``import_folder``: the reference's sample folder imported (the API reports it, the renderers
give its bytes back), and every kind of malformed folder refused, naming the file, with
nothing imported."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from agentchat.folder import importer
from channels_app.models import Channel, Cursor, MarkerClaim, Message, Presence
from tests.commands import manage, manage_env, own_sqlite_file
from tests.folder.rows import channel_files

ROOT = Path(__file__).resolve().parents[2]
# A folder the reference CLI wrote (shared/fixtures/ref-root-sample.tar.gz, REFERENCE-CLI §9).
FIXTURE = ROOT / "tests" / "fixtures" / "ref-root-sample.tar.gz"

pytestmark = pytest.mark.django_db


def extract(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(target, filter="data")
    return target


@pytest.fixture
def ref_root(tmp_path: Path) -> Path:
    return extract(tmp_path / "root")


def row_counts() -> dict[str, int]:
    """Every table of the project's apps (and the agents): what an import may change."""
    models = [
        model
        for model in apps.get_models()
        if model._meta.app_label in {"core", "channels_app", "tasks_app", "locks_app", "agentchat"}
    ]
    return {model._meta.label: model.objects.count() for model in models}


def import_folder(root: Path, *args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("import_folder", "--root", str(root), *args, stdout=out)
    return out.getvalue()


# --- the sample folder ----------------------------------------------------------------------


def test_the_sample_folder_is_imported(ref_root, api_for):
    out = import_folder(ref_root)
    assert out.splitlines() == [
        "imported backend: 29 messages, 4 tasks, 2 leases, 1 locks, 2 cursors, 1 claimed markers",
        "imported design: 9 messages, 1 tasks, 1 leases, 1 locks, 1 cursors, 0 claimed markers",
    ]
    backend = Channel.objects.get(name="backend")
    assert backend.last_seq == 29
    assert backend.members == ["alice", "bob", "carol"]
    assert backend.topic == "Payments API v2: schema, endpoints, rollout"

    api = api_for("alice")
    peek = api.get("/api/v1/channels/backend/messages/?after=0&limit=100").json()
    messages = peek["messages"]
    assert [m["seq"] for m in messages] == list(range(1, 30))
    second = messages[1]
    assert (second["from"], second["to"], second["reply_to"], second["status"]) == (
        "bob",
        ["alice"],
        1,
        "ack",
    )
    assert second["ts"] == "2026-11-29T15:46:18+00:00"
    assert messages[2]["to"] == ["alice", "bob"]
    assert messages[6]["title"] == "Standup 09:30 ✓ — Ünïcode & emoji 🚀 ok"
    kinds = {m["seq"]: m["kind"] for m in messages}
    # Audit-shaped files are messages someone wrote into a folder, not this server's audit.
    assert messages[7]["status"] == "task.created"
    assert kinds[8] == kinds[12] == kinds[14] == kinds[29] == "message"
    assert kinds[25] == kinds[27] == "event"
    assert kinds[1] == kinds[23] == "message"
    assert all(m["imported"] is True and m["sender_kind"] == "agent" for m in messages)

    tasks = api.get("/api/v1/channels/backend/tasks/").json()
    by_id = {task["id"]: task for task in tasks["tasks"]}
    assert sorted(by_id) == ["T-0001", "T-0002", "T-0003", "T-0004"]
    assert by_id["T-0002"]["lease"]["owner"] == "carol"
    assert by_id["T-0002"]["lease_expires_at"] == "2027-11-29T15:46:19.000000+00:00"
    assert by_id["T-0002"]["depends_on"] == ["T-0001"]
    assert by_id["T-0001"]["status"] == "done"

    locks = api.get("/api/v1/channels/backend/locks/").json()
    assert [lock["lock_id"] for lock in locks["locks"]] == ["226051ce4466421683b3708acb8b98f8"]

    events = api.get("/api/v1/channels/backend/events/?type=status").json()
    assert [(e["seq"], e["event"]["agent"], e["event"]["status"]) for e in events["events"]] == [
        (27, "carol", "busy"),
        (28, "bob", "idle"),
    ]
    presence = {p.agent: p for p in Presence.objects.filter(channel=backend)}
    assert presence["carol"].status == "busy"
    assert presence["carol"].detail == "implementing POST /payments"
    assert presence["carol"].status_seq == 27
    assert presence["alice"].primitives is not None
    assert presence["alice"].last_seq == 29  # the state.compacted audit

    cursors = dict(Cursor.objects.filter(channel=backend).values_list("agent__name", "seq"))
    assert cursors == {"bob": 28, "carol": 28}
    # bob's cursor, through the API: nothing after 28 but alice's audit at 29.
    bob = api_for("bob")
    read = bob.post("/api/v1/channels/backend/read/", {}, format="json").json()
    assert [m["seq"] for m in read["messages"]] == [29]

    assert list(MarkerClaim.objects.values_list("marker", "owner")) == [
        ("task-runbook.md", "alice")
    ]


def _fixture_files(channel_dir: Path) -> dict[str, bytes]:
    """The fixture's files that the renderers make (messages, _meta.json, records, cursors)."""
    out = {}
    for path in sorted(channel_dir.rglob("*")):
        name = path.relative_to(channel_dir).as_posix()
        if path.is_dir():
            continue
        top = name.split("/")[0]
        if (
            importer.message_seq(name) is not None
            or name == "_meta.json"
            or top in {"tasks", "claims", "locks", ".cursors"}
        ):
            out[name] = path.read_bytes()
    return out


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "read-again"])
@pytest.mark.parametrize("name", ["backend", "design"])
def test_rendering_the_imported_rows_gives_the_fixtures_bytes(ref_root, name, kept, monkeypatch):
    if not kept:  # the second pass reads every message file again
        monkeypatch.setattr(importer, "CACHE_BYTES", 0)
    import_folder(ref_root)
    rendered = channel_files(Channel.objects.get(name=name))
    expected = _fixture_files(ref_root / name)
    assert sorted(rendered) == sorted(expected)
    for file_name, data in expected.items():
        assert rendered[file_name] == data, file_name


def test_our_own_folder_round_trips_with_our_extra_keys(api_for, tmp_path):
    from agentchat.folder.sync import folder_sync

    api = api_for("alice")
    assert (
        api.post(
            "/api/v1/channels/", {"name": "ours", "members": ["alice"]}, format="json"
        ).status_code
        == 201
    )
    body = {
        "from": "alice",
        "title": "with everything",
        "body": "x\n\n  indented\n",
        "to": ["bob", "carol"],
        "id": "client-id-1",
        "conversation_id": "conv-1",
        "correlation_id": "corr-1",
        "content_type": "text/markdown",
        "data": {"b": [1, 2], "a": "ü"},
        "metadata": {"k": "v"},
    }
    r = api.post("/api/v1/channels/ours/messages/", body, format="json")
    assert r.status_code == 201, r.content
    assert (
        api.post(
            "/api/v1/channels/ours/tasks/", {"id": "T-1", "title": "t"}, format="json"
        ).status_code
        == 201
    )
    r = api.post("/api/v1/channels/ours/locks/", {"paths": ["src/a.py", "docs"]}, format="json")
    assert r.status_code == 201, r.content
    channel = Channel.objects.get(name="ours")
    before = channel_files(channel)
    folder_sync(root=tmp_path, channel="ours")
    channel.delete()
    import_folder(tmp_path)
    after = channel_files(Channel.objects.get(name="ours"))
    assert after == before
    message = Message.objects.get(channel__name="ours", seq=1)
    assert (message.id, message.data, message.metadata) == ("client-id-1", body["data"], {"k": "v"})
    assert message.frontmatter == []


def test_free_text_senders_to_spellings_and_extra_keys_are_kept(ref_root):
    channel = ref_root / "backend"
    (channel / "0030-alice-smith-hi.md").write_text(
        "---\nseq: 999\nfrom: Alice Smith\nto: [bob, dave]\nreply_to: 77\nchannel: elsewhere\n"
        "ts: 2026-11-29T16:46:20.5+01:00\nstatus: \ntitle: hi\ntype: decision\n"
        "decision: yes\n---\n  body kept\n\n\n",
        encoding="utf-8",
    )
    (channel / "31-unpadded.md").write_text(
        "---\nfrom: bob\nto: *\nts: 2026-11-29T15:46:20Z\ntitle: \n---\n", encoding="utf-8"
    )
    import_folder(ref_root)
    message = Message.objects.get(channel__name="backend", seq=30)
    assert message.sender == "Alice Smith"
    assert message.to == ["bob", "dave"]
    assert message.reply_to == 77  # no such message: accepted
    assert message.ts_text == "2026-11-29T16:46:20.5+01:00"
    assert message.status == ""
    assert message.body == "  body kept"
    assert message.frontmatter == [["type", "decision"], ["decision", "yes"]]
    assert message.kind == "message"
    unpadded = Message.objects.get(channel__name="backend", seq=31)
    assert (unpadded.to, unpadded.title, unpadded.ts_text) == ([], "", "2026-11-29T15:46:20Z")
    assert Channel.objects.get(name="backend").last_seq == 31
    assert Presence.objects.get(channel__name="backend", agent="Alice Smith").last_seq == 30


def test_only_the_named_channel_is_imported(ref_root):
    assert import_folder(ref_root, "--channel", "design").startswith("imported design:")
    assert list(Channel.objects.values_list("name", flat=True)) == ["design"]


def test_ignored_files_are_ignored(ref_root):
    channel = ref_root / "backend"
    (channel / "_seq.lock").mkdir()
    (channel / "tasks" / ".T-1.abc.tmp").write_text("garbage")
    (channel / "claims" / "_notes.json").write_text("garbage")
    (channel / "README.md").write_text("not a message")
    (channel / "task-open.md").write_text("an unclaimed marker")
    (channel / "state.md").write_text("anything")
    import_folder(ref_root)
    assert Message.objects.filter(channel__name="backend").count() == 29


# --- malformed folders ----------------------------------------------------------------------


def _write(path: str, text: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")

    return change


def _edit_json(path: str, **changes: object) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        data = json.loads((root / path).read_text(encoding="utf-8"))
        for key, value in changes.items():
            if value is ...:
                del data[key]
            else:
                data[key] = value
        (root / path).write_text(json.dumps(data, indent=2), encoding="utf-8")

    return change


def _replace(path: str, old: str, new: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / path).read_text(encoding="utf-8")
        assert old in text
        (root / path).write_text(text.replace(old, new, 1), encoding="utf-8")

    return change


def _symlink(path: str, target: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        link = root / path
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(target)

    return change


def _fifo(path: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / path).unlink()
        os.mkfifo(root / path)

    return change


MSG = "backend/0002-bob-re-kickoff.md"
TASK = "backend/tasks/T-0002.json"
CLAIM = "backend/claims/T-0002.carol.json"
LOCK = "backend/locks/226051ce4466421683b3708acb8b98f8.json"
EVENT = "backend/0027-carol-event-status.md"

MALFORMED = {
    "no frontmatter": (_write(MSG, "just text\n"), "IMPORT_BAD_FRONTMATTER", MSG),
    "unterminated frontmatter": (
        _write(MSG, "---\nfrom: bob\nts: 2026-11-29T15:46:18+00:00\nbody\n"),
        "IMPORT_BAD_FRONTMATTER",
        MSG,
    ),
    "line without key": (
        _replace(MSG, "status: ack\n", "status ack\n"),
        "IMPORT_BAD_FRONTMATTER",
        MSG,
    ),
    "key given twice": (
        _replace(MSG, "status: ack\n", "status: ack\nfrom: eve\n"),
        "IMPORT_BAD_FRONTMATTER",
        MSG,
    ),
    "ts without offset": (
        _replace(MSG, "ts: 2026-11-29T15:46:18+00:00", "ts: 2026-11-29T15:46:18"),
        "IMPORT_BAD_FRONTMATTER",
        MSG,
    ),
    "reply_to not a number": (
        _replace(MSG, "reply_to: 1", "reply_to: one"),
        "IMPORT_BAD_FRONTMATTER",
        MSG,
    ),
    "not UTF-8": (
        lambda root: (root / MSG).write_bytes(b"---\nfrom: \xff\n---\n"),
        "IMPORT_UNREADABLE",
        MSG,
    ),
    "duplicate seq": (
        _write("backend/0002-eve-again.md", "---\nts: 2026-11-29T15:46:18+00:00\n---\n"),
        "IMPORT_DUPLICATE_SEQ",
        "backend/0002-eve-again.md",
    ),
    "seq zero": (
        _write("backend/0000-eve.md", "---\nts: 2026-11-29T15:46:18+00:00\n---\n"),
        "IMPORT_INVALID_FILE_NAME",
        "backend/0000-eve.md",
    ),
    "event body no JSON": (_replace(EVENT, '{"agent"', 'x{"agent"'), "EVENT_MALFORMED_BODY", EVENT),
    "event body no event": (
        _replace(EVENT, '"status":"busy"', '"status":"napping"'),
        "EVENT_INVALID_STATUS",
        EVENT,
    ),
    "status event.* on a plain post": (
        _replace(
            "backend/0001-alice-kickoff-payments-api-v2.md",
            "status: discussion",
            "status: event.note",
        ),
        "EVENT_MALFORMED_BODY",
        "backend/0001-alice-kickoff-payments-api-v2.md",
    ),
    "unknown task status": (_edit_json(TASK, status="doing"), "TASK_INVALID_STATUS", TASK),
    "task unknown key": (_edit_json(TASK, priority=1), "TASK_UNKNOWN_FIELD", TASK),
    "task missing key": (_edit_json(TASK, branch=...), "TASK_REQUIRED_FIELD_MISSING", TASK),
    "task id not its file": (_edit_json(TASK, id="T-0009"), "TASK_RECORD_ID_MISMATCH", TASK),
    "task of another channel": (_edit_json(TASK, channel="design"), "TASK_CHANNEL_MISMATCH", TASK),
    "task time without offset": (
        _edit_json(TASK, updated_at="2026-11-29T15:46:20"),
        "TASK_INVALID_TIMESTAMP",
        TASK,
    ),
    "task not JSON": (_write(TASK, "{"), "TASK_INVALID_RECORD", TASK),
    "task duplicate key": (
        _write(TASK, '{"id": "T-0002", "id": "T-0002"}'),
        "TASK_INVALID_RECORD",
        TASK,
    ),
    "unknown dependency": (
        _edit_json(TASK, depends_on=["T-0042"]),
        "TASK_UNKNOWN_DEPENDENCY",
        TASK,
    ),
    "dependency cycle": (
        _edit_json("backend/tasks/T-0001.json", depends_on=["T-0002"]),
        "TASK_DEPENDENCY_CYCLE",
        "backend/tasks/T-0001.json",
    ),
    "lease expiry without claim": (
        lambda root: (root / CLAIM).unlink(),
        "LEASE_INCONSISTENT",
        TASK,
    ),
    "claim disagrees with task": (
        _edit_json(CLAIM, lease_expires_at="2027-11-29T15:46:19+00:00"),
        "LEASE_INCONSISTENT",
        CLAIM,
    ),
    "claim unknown key": (_edit_json(CLAIM, note="x"), "LEASE_UNKNOWN_FIELD", CLAIM),
    "claim not its file": (
        lambda root: (root / CLAIM).rename(root / "backend/claims/T-0002.dave.json"),
        "LEASE_RECORD_ID_MISMATCH",
        "backend/claims/T-0002.dave.json",
    ),
    "claim time without offset": (
        _edit_json(CLAIM, claimed_at="2026-11-29T15:46:19"),
        "LEASE_INVALID_TIMESTAMP",
        CLAIM,
    ),
    "lease transaction pending": (
        _write("backend/claims/.lease-transaction.json", "{}"),
        "LEASE_TRANSACTION_PENDING",
        "backend/claims/.lease-transaction.json",
    ),
    "lock transaction pending": (
        _write("backend/locks/.path-lock-transaction.json", "{}"),
        "PATH_LOCK_TRANSACTION_PENDING",
        "backend/locks/.path-lock-transaction.json",
    ),
    "lock unknown key": (_edit_json(LOCK, note="x"), "PATH_LOCK_INVALID_RECORD", LOCK),
    "lock path not canonical": (
        _replace(
            LOCK, '"normalized_path": "api/payments.py"', '"normalized_path": "./api/payments.py"'
        ),
        "PATH_LOCK_INVALID_RECORD",
        LOCK,
    ),
    "lock aliases disagree": (
        _edit_json(LOCK, lease_expires_at="2027-01-01T00:00:00+00:00"),
        "PATH_LOCK_INVALID_RECORD",
        LOCK,
    ),
    "lock time without offset": (
        _edit_json(LOCK, locked_at="2026-11-29T15:46:20"),
        "PATH_LOCK_INVALID_TIMESTAMP",
        LOCK,
    ),
    "locks overlap": (
        lambda root: (root / "backend/locks/0123456789abcdef0123456789abcdef.json").write_text(
            (root / LOCK)
            .read_text()
            .replace("226051ce4466421683b3708acb8b98f8", "0123456789abcdef0123456789abcdef")
            .replace('"normalized_path": "api/payments.py"', '"normalized_path": "api"')
        ),
        "PATH_LOCK_CONFLICT",
        LOCK,
    ),
    "meta not JSON": (
        _write("backend/_meta.json", "{"),
        "IMPORT_INVALID_META",
        "backend/_meta.json",
    ),
    "meta names another channel": (
        _edit_json("backend/_meta.json", channel="other"),
        "IMPORT_INVALID_META",
        "backend/_meta.json",
    ),
    "member outside the name rule": (
        _edit_json("backend/_meta.json", members=["Alice Smith"]),
        "INVALID_NAME",
        "backend/_meta.json",
    ),
    "cursor garbage": (
        _write("backend/.cursors/bob.txt", "twelve"),
        "IMPORT_INVALID_CURSOR",
        "backend/.cursors/bob.txt",
    ),
    "cursor not a slug": (
        _write("backend/.cursors/Bob.txt", "1"),
        "IMPORT_INVALID_FILE_NAME",
        "backend/.cursors/Bob.txt",
    ),
    "channel name outside the rule": (
        lambda root: shutil.copytree(root / "design", root / "my design"),
        "INVALID_NAME",
        "my design",
    ),
    "symlinked message out of the root": (
        _symlink(MSG, "/etc/hostname"),
        "IMPORT_PATH_OUTSIDE_ROOT",
        MSG,
    ),
    "symlinked tasks folder": (
        lambda root: (
            shutil.rmtree(root / "backend/tasks"),
            (root / "backend/tasks").symlink_to(root / "design/tasks"),
        ),
        "IMPORT_PATH_OUTSIDE_ROOT",
        "backend/tasks",
    ),
    "symlinked channel": (
        _symlink("linked", str(Path("/tmp"))),
        "IMPORT_PATH_OUTSIDE_ROOT",
        "linked",
    ),
    "message is a fifo": (_fifo(MSG), "IMPORT_UNREADABLE", MSG),
    # A name, title or status that reads one way and compares another is a spoof, as in a
    # channel's topic.
    "invisible character in from": (
        _replace(MSG, "from: bob\n", "from: ad\u200dmin\n"),
        "INVISIBLE_CHARACTER",
        MSG,
    ),
    "bidi override in title": (
        _replace(MSG, "title: Re: Kickoff\n", "title: Approved \u202eyb devorppa\n"),
        "INVISIBLE_CHARACTER",
        MSG,
    ),
    "byte order mark in status": (
        _replace(MSG, "status: ack\n", "status: \ufeffneeds-approval\n"),
        "INVISIBLE_CHARACTER",
        MSG,
    ),
    "bidi override in an event's detail": (
        _replace(EVENT, '"detail":"implementing', '"detail":"\u202eimplementing'),
        "INVISIBLE_CHARACTER",
        EVENT,
    ),
    "zero width joiner in an event's harness": (
        _replace(EVENT, '"harness":"opencode"', '"harness":"open\u200dcode"'),
        "INVISIBLE_CHARACTER",
        EVENT,
    ),
    "blank-looking title": (
        _replace(MSG, "title: Re: Kickoff\n", "title: \u3164\n"),
        "INVISIBLE_CHARACTER",
        MSG,
    ),
    "message too big": (
        _write(
            MSG,
            "---\nts: 2026-11-29T15:46:18+00:00\n---\n" + "x" * (importer.MESSAGE_MAX_BYTES + 1),
        ),
        "IMPORT_LIMIT_EXCEEDED",
        MSG,
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_folder_is_refused_naming_the_file_and_nothing_is_imported(ref_root, case):
    change, code, where = MALFORMED[case]
    change(ref_root)
    before = row_counts()
    with pytest.raises(CommandError) as caught:
        import_folder(ref_root)
    message = str(caught.value)
    assert message.startswith(f"{code}: {where}"), message
    assert caught.value.returncode != 0
    assert row_counts() == before


def test_a_channel_that_exists_refuses_the_whole_import(ref_root, api_for):
    api_for("dave").post("/api/v1/channels/", {"name": "Design"}, format="json")
    before = row_counts()
    with pytest.raises(CommandError, match=r"^CHANNEL_EXISTS: design: "):
        import_folder(ref_root)
    assert row_counts() == before


def test_a_message_id_taken_refuses_the_import(ref_root, api_for):
    api = api_for("alice")
    api.post("/api/v1/channels/", {"name": "other"}, format="json")
    r = api.post(
        "/api/v1/channels/other/messages/",
        {"from": "alice", "title": "t", "body": "b", "id": "taken-1"},
        format="json",
    )
    assert r.status_code == 201
    _replace(MSG, "title: Re: Kickoff\n", "title: Re: Kickoff\nid: taken-1\n")(ref_root)
    before = row_counts()
    with pytest.raises(CommandError, match=rf"^ID_CONFLICT: {MSG}: "):
        import_folder(ref_root)
    assert row_counts() == before


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "read-again"])
def test_a_file_changed_between_the_passes_refuses_the_import(ref_root, monkeypatch, kept):
    if not kept:
        monkeypatch.setattr(importer, "CACHE_BYTES", 0)
    real = importer.messages_stream

    def tampered(root, plan):
        if plan.name == "backend":
            (root / MSG).write_text((root / MSG).read_text() + "more\n")
        return real(root, plan)

    monkeypatch.setattr(importer, "messages_stream", tampered)
    before = row_counts()
    with pytest.raises(CommandError, match=rf"^IMPORT_FOLDER_CHANGED: {MSG}: "):
        import_folder(ref_root)
    assert row_counts() == before


def test_too_many_entries_are_refused(ref_root, monkeypatch):
    monkeypatch.setattr(importer, "MAX_ENTRIES", 20)
    with pytest.raises(CommandError, match=r"^IMPORT_LIMIT_EXCEEDED: backend: more than 20"):
        import_folder(ref_root)
    assert not Channel.objects.exists()


def test_a_missing_root_or_channel_is_refused(tmp_path, ref_root):
    with pytest.raises(CommandError, match=r"^IMPORT_ROOT_INVALID: "):
        import_folder(tmp_path / "nowhere")
    with pytest.raises(CommandError, match=r"^IMPORT_CHANNEL_NOT_FOUND: "):
        import_folder(ref_root, "--channel", "nosuch")
    with pytest.raises(CommandError, match=r"^INVALID_NAME: "):
        import_folder(ref_root, "--channel", "../etc")


@own_sqlite_file
def test_the_command_prints_the_code_and_exits_with_its_family_without_a_traceback(tmp_path):
    root = extract(tmp_path / "root")
    original = (root / TASK).read_bytes()
    (root / TASK).write_text("{", encoding="utf-8")
    env = manage_env(tmp_path, AGENTCHAT_DATA_DIR=str(tmp_path / "data"))

    assert manage(env, "migrate", "--noinput").returncode == 0
    run = manage(env, "import_folder", "--root", str(root))
    assert run.returncode == 2  # TASK_* is the reference's family 2
    assert run.stderr.startswith(f"CommandError: TASK_INVALID_RECORD: {TASK}: not a valid JSON")
    assert "Traceback" not in run.stderr
    (root / TASK).write_bytes(original)
    run = manage(env, "import_folder", "--root", str(root))
    assert run.returncode == 0, run.stderr
    assert "imported backend: 29 messages, 4 tasks, 2 leases" in run.stdout


def test_cursors_and_markers_go_to_the_member_or_sender_of_their_slug(ref_root):
    _edit_json("backend/_meta.json", members=["alice", "bob.sub", "carol"])(ref_root)
    _write("backend/.cursors/bob-sub.txt", "  7 \n")(ref_root)
    _write("backend/.cursors/alice-smith.txt", "")(ref_root)
    _write("backend/task-x.CLAIMED-bob-sub.md", "claimed")(ref_root)
    import_folder(ref_root)
    cursors = dict(Cursor.objects.filter(channel__name="backend").values_list("agent__name", "seq"))
    assert cursors == {"bob": 28, "carol": 28, "bob.sub": 7, "alice-smith": 0}
    assert set(MarkerClaim.objects.values_list("marker", "owner")) == {
        ("task-runbook.md", "alice"),
        ("task-x.md", "bob.sub"),
    }


def test_a_members_only_channel_keeps_its_roster(ref_root, api_for):
    _edit_json("design/_meta.json", visibility="members")(ref_root)
    import_folder(ref_root)
    assert Channel.objects.get(name="design").visibility == "members"
    assert api_for("dave").get("/api/v1/channels/design/").status_code == 200
    assert api_for("eve").get("/api/v1/channels/design/").status_code == 404
    assert channel_files(Channel.objects.get(name="design"))["_meta.json"].endswith(
        b'"visibility": "members"\n}'
    )


def test_hidden_and_meta_less_folders_are_not_channels(ref_root):
    shutil.copytree(ref_root / "design", ref_root / ".hidden")
    shutil.copytree(ref_root / "design", ref_root / "_private")
    (ref_root / "notes").mkdir()
    (ref_root / "README.md").write_text("a file")
    (ref_root / "LINK.md").symlink_to(ref_root / "README.md")  # a link to a file: ignored
    out = import_folder(ref_root)
    assert [line.split(":")[0] for line in out.splitlines()] == [
        "imported backend",
        "imported design",
    ]


def test_the_sample_imported_then_synced_is_the_sample_file_for_file(tmp_path):
    """Import, then sync: every file of the reference's folder comes back with its bytes, but
    ``state.md`` (derived: never imported, written only by a compaction here)."""
    from agentchat.folder.sync import folder_sync

    source = extract(tmp_path / "source")
    import_folder(source)
    synced = tmp_path / "synced"
    folder_sync(root=synced)

    def files(root):
        return {
            str(path.relative_to(root)): path.read_bytes()
            for path in root.rglob("*")
            if path.is_file() and ".agentchat-sync" not in path.parts
        }

    theirs, ours = files(source), files(synced)
    missing = sorted(set(theirs) - set(ours))
    assert missing == ["backend/state.md", "design/state.md"]
    assert sorted(set(ours) - set(theirs)) == []
    for name in sorted(set(theirs) & set(ours)):
        assert ours[name] == theirs[name], name


def test_a_claimed_markers_text_is_kept_and_a_nul_in_it_refused(ref_root):
    _write("backend/task-x.CLAIMED-bob.md", "line one\nline two\n")(ref_root)
    import_folder(ref_root)
    assert MarkerClaim.objects.get(marker="task-x.md").text == "line one\nline two\n"
    assert MarkerClaim.objects.get(marker="task-runbook.md").text == (
        "Update the runbook for payments v2.\n"
    )


def test_a_claimed_marker_whose_text_cannot_be_kept_is_still_a_claim(ref_root):
    """The reference renames a marker whatever it holds: a NUL, bytes that are not UTF-8 or a
    text over 64 KiB refuse nothing; the claim is kept, its text empty."""
    _write("backend/task-nul.CLAIMED-bob.md", "bad\x00text")(ref_root)
    (ref_root / "backend/task-bin.CLAIMED-bob.md").write_bytes(b"\xff\xfe")
    _write("backend/task-big.CLAIMED-bob.md", "x" * (importer.MARKER_MAX_BYTES + 1))(ref_root)
    import_folder(ref_root)
    texts = dict(MarkerClaim.objects.values_list("marker", "text"))
    assert texts["task-nul.md"] == texts["task-bin.md"] == texts["task-big.md"] == ""
    assert texts["task-runbook.md"] == "Update the runbook for payments v2.\n"


def test_a_hostile_file_name_is_shown_escaped_in_the_error(ref_root):
    """An error naming a file whose name holds escape sequences, a bell and a bidi override
    shows them escaped: the operator's terminal acts on none of them."""
    name = "T-\x1b]0;pwned\x07\u202e.json"
    (ref_root / "backend" / "tasks" / name).write_text("{", encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        import_folder(ref_root)
    message = str(caught.value)
    assert not any(ch in message for ch in "\x1b\x07\u202e"), repr(message)
    assert "T-\\x1b]0;pwned\\x07\\u202e.json" in message


def test_terminal_safe_escapes_what_a_terminal_acts_on():
    from agentchat.core.rules.terminal import terminal_safe

    assert terminal_safe("a\x1b[2J\x07\x9b\x7f\u2028\u200b\u2066é\U0001f600") == (
        "a\\x1b[2J\\x07\\x9b\\x7f\\u2028\\u200b\\u2066é\U0001f600"
    )
    assert terminal_safe("one\ntwo\t", keep="\n") == "one\ntwo\\x09"
