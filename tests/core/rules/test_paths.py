"""The floor's workspace path rules (agentchat.core.rules.paths), with the caller's error code."""

from __future__ import annotations

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.paths import casefold_stable, safe_text, workspace_path_normalize

INVALID = "INVALID"  # the table's marker for "refused"
CODE = "TASK_INVALID_FILES_HINT"  # any declared code: the caller chooses

# (input, expected normalized path or error code). The document's rules, the reference's
# observed cases and the hard cases of PERF-NOTES §6 item 8.
WORKSPACE_PATH_TABLE = [
    # accepted: separators, "." and empty segments collapse
    ("src/a.py", "src/a.py"),
    ("./src//a.py", "src/a.py"),
    ("docs/", "docs"),
    ("a/./b/.", "a/b"),
    ("a//b///c", "a/b/c"),
    (".", "."),
    ("./", "."),
    ("./././", "."),
    # accepted: dots inside names, hidden names, odd but harmless characters
    (".git/config", ".git/config"),
    (".env", ".env"),
    ("a..b", "a..b"),
    ("...a", "...a"),
    ("a b/c d.txt", "a b/c d.txt"),
    ("~/notes", "~/notes"),
    ("50%off.txt", "50%off.txt"),
    ("100%", "100%"),
    ("CONFIG/console.log", "CONFIG/console.log"),
    ("COM10/LPT10", "COM10/LPT10"),
    ("日本語/ファイル.txt", "日本語/ファイル.txt"),
    ("emoji-😀.md", "emoji-😀.md"),
    # Unicode: NFD and NFC are one path; full-width letters stay (NFKC only used to refuse)
    ("cafe\u0301/x", "caf\u00e9/x"),
    ("caf\u00e9/x", "caf\u00e9/x"),
    ("\uff41\uff0e\uff42", "\uff41\uff0e\uff42"),
    # glob characters are ordinary characters to these rules
    ("src/**/*.py", "src/**/*.py"),
    ("[z-a]", "[z-a]"),
    # refused: traversal
    ("..", INVALID),
    ("../outside", INVALID),
    ("a/../b", INVALID),
    ("a/..", INVALID),
    ("a/../../etc/passwd", INVALID),
    # refused: absolute paths, drives, colons, backslashes
    ("/etc/passwd", INVALID),
    ("//server/share", INVALID),
    ("C:/Windows", INVALID),
    ("c:x", INVALID),
    ("a:b", INVALID),
    ("file.txt:stream", INVALID),
    ("a\\b", INVALID),
    ("\\\\server\\share", INVALID),
    ("..\\x", INVALID),
    # refused: control characters, lone surrogates, bidi overrides
    ("", INVALID),
    ("a\x00b", INVALID),
    ("a\nb", INVALID),
    ("a\x1fb", INVALID),
    ("a\x7fb", INVALID),
    ("a\x85b", INVALID),
    ("a\x9fb", INVALID),
    ("\ud800", INVALID),
    ("a/\udfff", INVALID),
    ("evil\u202etxt.exe", INVALID),
    # refused: invisible format characters and blank-looking ones (``src/a\u200b.py`` shows as
    # ``src/a.py``)
    ("src/a\u200b.py", INVALID),
    ("src/a\u200d.py", INVALID),
    ("\ufeffsrc/a.py", INVALID),
    ("src/a\u061c.py", INVALID),
    ("src/a\u00ad.py", INVALID),
    ("src/\u3164/a.py", INVALID),
    ("src/a\u2800.py", INVALID),
    ("src/a\u034f.py", INVALID),
    ("src/\uffa0.py", INVALID),
    ("src/\u2764\ufe0f.md", "src/\u2764\ufe0f.md"),  # an emoji's variation selector is kept
    # refused: Windows reserved names (any case, any extension, superscript digits)
    ("CON", INVALID),
    ("con", INVALID),
    ("nul.txt", INVALID),
    ("src/aux.c", INVALID),
    ("LPT1", INVALID),
    ("COM0", INVALID),
    ("COM\u00b9", INVALID),
    ("CON .txt", INVALID),
    ("conin$", INVALID),
    # refused: segments ending in a dot or a space
    ("a.", INVALID),
    ("a ", INVALID),
    ("src./a", INVALID),
    ("...", INVALID),
    ("a\u00a0", INVALID),
    # refused: percent-escapes and compatibility look-alikes of dots and separators
    ("%2e%2e/x", INVALID),
    ("%2F", INVALID),
    ("a%5cb", INVALID),
    ("\uff0e\uff0e", INVALID),
    ("\uff0e\uff0e/x", INVALID),
    ("\u2025", INVALID),
    ("a\uff0fb", INVALID),
    ("a\uff3cb", INVALID),
    ("a\uff1ab", INVALID),
    # refused: too long, too deep, broken patterns
    ("x" * 1025, INVALID),
    ("a/" * 129, INVALID),
    ("x" * 256, INVALID),
]


@pytest.mark.parametrize(("raw", "expected"), WORKSPACE_PATH_TABLE)
def test_workspace_path_table(raw, expected):
    if expected == INVALID:
        with pytest.raises(AppError) as exc:
            workspace_path_normalize(raw, code=CODE)
        assert exc.value.code == CODE
        assert exc.value.detail == {"path": safe_text(raw)}
    else:
        path = workspace_path_normalize(raw, code=CODE)
        assert path.normalized == expected
        assert path.display == raw


def test_the_field_is_named_in_the_detail_when_given():
    with pytest.raises(AppError) as exc:
        workspace_path_normalize("../x", code=CODE, field="files_hint[2]")
    assert exc.value.detail == {"path": "../x", "field": "files_hint[2]"}
    assert exc.value.message == "parent traversal is not allowed"


@pytest.mark.parametrize("raw", [None, 1, 1.5, True, ["a"], {"a": 1}, ""])
def test_non_strings_and_empty_strings_are_refused(raw):
    with pytest.raises(AppError) as exc:
        workspace_path_normalize(raw, code=CODE)
    assert exc.value.code == CODE


@pytest.mark.parametrize(
    ("raw", "kind"), [("docs/", "directory"), ("docs/.", "directory"), (".", "directory"),
                      ("docs", "file")]
)  # fmt: skip
def test_kind(raw, kind):
    assert workspace_path_normalize(raw, code=CODE).kind == kind


def test_case_folding_is_stable_and_optional():
    assert workspace_path_normalize("Src/STRASSE", code=CODE).normalized == "Src/STRASSE"
    folded = workspace_path_normalize("Src/Straße", code=CODE, case_insensitive=True)
    assert folded.normalized == "src/strasse"
    assert casefold_stable(folded.normalized) == folded.normalized


def test_safe_text_makes_any_value_printable():
    assert safe_text("\ud800x") == "\\ud800x"
    assert safe_text(float("nan")) == "nan"
    assert safe_text("y" * 400).endswith("…")
    assert safe_text(object()).startswith("<object")
