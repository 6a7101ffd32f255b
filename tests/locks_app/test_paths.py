"""Path normalization and overlap, as pure functions (locks_app.paths, locks_app.globs)."""

from __future__ import annotations

import itertools
import posixpath
import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentchat.core.rules.errors import AppError
from locks_app.globs import (
    WorkBudget,
    is_pattern,
    paths_overlap,
    segment_matches,
    wildcard_count,
)
from locks_app.paths import MAX_PATHS, path_normalize, paths_normalize
from tests.core.rules.test_paths import INVALID as REFUSED
from tests.core.rules.test_paths import WORKSPACE_PATH_TABLE

INVALID = "PATH_LOCK_INVALID_PATH"

# Glob syntax on top of the floor's table (tests/core/rules/test_paths.py), which holds for lock
# paths too except where a line here says otherwise.
GLOB_TABLE = [
    ("src/**/*.py", "src/**/*.py"),
    ("src/[a-c]?.py", "src/[a-c]?.py"),
    ("report[[]1].txt", "report[[]1].txt"),
    ("[*]", "[*]"),
    ("x]y", "x]y"),
    ("a[b", "a[b"),
    ("[z-a]", INVALID),
]
NORMALIZATION_TABLE = [
    *(
        (raw, INVALID if expected == REFUSED else expected)
        for raw, expected in WORKSPACE_PATH_TABLE
        if raw not in dict(GLOB_TABLE)
    ),
    *GLOB_TABLE,
]


@pytest.mark.parametrize(("raw", "expected"), NORMALIZATION_TABLE)
def test_normalization_table(raw, expected):
    if expected == INVALID:
        with pytest.raises(AppError) as exc:
            path_normalize(raw)
        assert exc.value.code == INVALID
        assert exc.value.status == 400
    else:
        entry = path_normalize(raw)
        assert entry.normalized_path == expected
        assert entry.display_path == raw


@pytest.mark.parametrize("raw", [None, 1, 1.5, True, ["a"], {"a": 1}])
def test_non_strings_are_invalid_paths(raw):
    with pytest.raises(AppError) as exc:
        path_normalize(raw)
    assert exc.value.code == INVALID


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("docs/", "directory"),
        ("docs/.", "directory"),
        (".", "directory"),
        ("./", "directory"),
        ("docs", "file"),
        ("src/a.py", "file"),
        ("src/**", "file"),
        ("src/**/", "directory"),
    ],
)
def test_kind_is_directory_for_a_trailing_slash(raw, kind):
    assert path_normalize(raw).kind == kind


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Src/Main.PY", "src/main.py"),
        ("STRASSE/Straße", "strasse/strasse"),
        ("ÉTÉ", "été"),
        ("E\u0301TE\u0301", "été"),
        ("SRC/[A-C]*.PY", "src/[a-c]*.py"),
    ],
)
def test_case_insensitive_setting_folds_case(raw, expected):
    entry = path_normalize(raw, case_insensitive=True)
    assert entry.normalized_path == expected
    assert entry.display_path == raw
    assert path_normalize(raw).normalized_path == unicodedata.normalize("NFC", raw)


def test_request_paths_must_be_a_non_empty_bounded_list():
    for raw in (None, [], "src", ("a",) * (MAX_PATHS + 1)):
        with pytest.raises(AppError) as exc:
            paths_normalize(list(raw) if isinstance(raw, tuple) else raw)
        assert exc.value.code == INVALID
    assert len(paths_normalize(["a", "b"])) == 2


@pytest.mark.parametrize(
    "paths",
    [["x/y", "x"], ["src", "./src/"], ["a", "a"], ["src/*.py", "src/a.py"], [".", "z"]],
)
def test_overlapping_paths_in_one_request_conflict(paths):
    with pytest.raises(AppError) as exc:
        paths_normalize(paths)
    assert exc.value.code == "PATH_LOCK_CONFLICT"
    assert exc.value.message == "requested paths overlap within one lock request"


# --- overlap -----------------------------------------------------------------------------

OVERLAP_TABLE = [
    # concrete paths: the reference rule
    ("src", "src/a.py", True),
    ("src", "src", True),
    ("a/b/c", "a/b", True),
    (".", "anything/at/all", True),
    ("src", "srcx", False),
    ("src/a", "src/b", False),
    ("a/bc", "a/b", False),
    # a pattern and a concrete path: conflict exactly when some path is covered by both
    ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/a.py/inner", True),
    ("src/*.py", "src", True),
    ("src/*.py", "src/a.txt", False),
    ("src/*.py", "src/sub/a.py", False),
    ("src/?.py", "src/a.py", True),
    ("src/?.py", "src/ab.py", False),
    ("src/[ab].py", "src/c.py", False),
    ("src/[!ab].py", "src/c.py", True),
    ("src/[^ab].py", "src/a.py", False),
    ("**/*.py", "deep/er/x.py", True),
    ("**/*.py", "docs/readme.md", True),  # docs/readme.md may be a folder holding x.py
    ("src/**", "src", True),
    ("src/**", "src/deep/x", True),
    ("src/**", "srcx", False),
    ("src/**", "docs/a.py", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/z", "b/z", False),
    ("*", "anything/deep", True),
    ("*.md", "docs/readme.md", False),
    ("[x]", "x", True),
    ("[[]x]", "x", False),
    ("report[[]1].txt", "report1.txt", False),
    ("report*", "report[[]1].txt", True),
    # two patterns
    ("*.py", "*.txt", False),
    ("*.py", "a*", True),
    ("src/*/a", "src/b/*", True),
    ("src/*/a", "src/b/c/*", False),
    ("[a-c]*", "[d-f]*", False),
    ("[a-c]*", "[c-f]*", True),
    ("?", "??", False),
    ("?*", "??", True),
    ("a/**", "**/b", True),
    ("x/**/y", "x/*/z", True),
    ("*.py", "[!.]*.txt", False),
    ("**", "x", True),
]


@pytest.mark.parametrize(("left", "right", "expected"), OVERLAP_TABLE)
def test_overlap_table_in_both_directions(left, right, expected):
    assert paths_overlap(left, right) is expected
    assert paths_overlap(right, left) is expected


# --- properties ----------------------------------------------------------------------------

PIECES = [
    "", ".", "..", "...", "a", "B", "src", "x.py", " ", "a ", "a.", "\\", ":", "C:", "%2e",
    "%2e%2e", "\uff0e\uff0e", "\u2025", "\uff0f", "CON", "nul.txt", "*", "**", "?", "[a-c]",
    "[!a]", "[z-a]", "[", "]", "e\u0301", "\u00e9", "\x00", "\x7f", "\ud800", "\u202e", "~",
    "Stra\u00dfe", "\u0130", "\ufb03",
]  # fmt: skip

any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=60)
path_like = st.lists(st.sampled_from(PIECES), max_size=8).map("/".join)
candidates = st.one_of(any_text, path_like, path_like.map(lambda p: "/" + p))


def assert_inside_workspace(normalized: str) -> None:
    assert normalized
    assert not normalized.startswith("/")
    assert "\\" not in normalized
    assert ":" not in normalized
    resolved = posixpath.normpath(posixpath.join("/workspace", normalized))
    assert resolved == "/workspace" or resolved.startswith("/workspace/")
    if normalized != ".":
        for segment in normalized.split("/"):
            assert segment not in {"", ".", ".."}
            assert unicodedata.normalize("NFKC", segment) not in {".", ".."}
            assert not any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in segment)
            assert not any(0xD800 <= ord(char) <= 0xDFFF for char in segment)


@settings(max_examples=400, deadline=None)
@given(raw=candidates, folded=st.booleans())
def test_no_input_escapes_the_workspace_and_normalization_is_idempotent(raw, folded):
    try:
        entry = path_normalize(raw, case_insensitive=folded)
    except AppError as exc:
        assert exc.code == INVALID
        return
    assert_inside_workspace(entry.normalized_path)
    again = path_normalize(entry.normalized_path, case_insensitive=folded)
    assert again.normalized_path == entry.normalized_path


SEGMENT_TOKENS = ["a", "b", "?", "*", "[ab]", "[!a]"]
NAMES = ["a", "b", "aa", "ab", "ba", "bb"]


@st.composite
def segment_patterns(draw):
    tokens = draw(st.lists(st.sampled_from(SEGMENT_TOKENS), min_size=1, max_size=3))
    pattern = "".join(tokens)
    consuming = sum(token != "*" for token in tokens)
    return pattern if consuming <= 2 else "*"


entries = st.lists(
    st.one_of(segment_patterns(), st.sampled_from(NAMES), st.just("**")), min_size=1, max_size=2
).map("/".join)
concrete = st.lists(st.sampled_from(NAMES), min_size=1, max_size=2).map("/".join)


def oracle_covers(entry: str, path: str) -> bool:
    """An independent reading of "covers": the entry as one regex over "/" + the path text,
    followed by anything below."""
    parts = []
    for segment in entry.split("/"):
        if len(segment) >= 2 and set(segment) == {"*"}:  # "**", "***", …: any segments
            parts.append("(?:/[^/]+)*")
            continue
        regex = ""
        for token in re.findall(r"\[!?[^]]+\]|\*|\?|[^[*?]", segment):
            if token == "*":
                regex += "[^/]*"
            elif token == "?":
                regex += "[^/]"
            elif token.startswith("[!"):
                regex += "[^/" + token[2:]
            elif token.startswith("["):
                regex += token
            else:
                regex += re.escape(token)
        parts.append("/" + regex)
    return re.fullmatch("".join(parts) + "(?:/.*)?", "/" + path) is not None


@settings(max_examples=300, deadline=None)
@given(left=entries, right=entries)
def test_overlap_is_symmetric(left, right):
    assert paths_overlap(left, right) == paths_overlap(right, left)


@settings(max_examples=300, deadline=None)
@given(
    left=entries, right=entries, witness=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4)
)
def test_overlap_never_misses_a_path_covered_by_both(left, right, witness):
    path = "/".join(witness)
    if oracle_covers(left, path) and oracle_covers(right, path):
        assert paths_overlap(left, right)


@settings(max_examples=300, deadline=None)
@given(pattern=entries, path=concrete)
@example(pattern="***/a", path="a/b")  # three stars are a globstar too (the oracle once said no)
def test_pattern_and_concrete_path_overlap_exactly(pattern, path):
    suffixes = [()] + [(n,) for n in NAMES] + list(itertools.product(NAMES, repeat=2))
    witnessed = any(oracle_covers(pattern, "/".join([path, *suffix])) for suffix in suffixes)
    assert paths_overlap(pattern, path) == witnessed


@settings(max_examples=300, deadline=None)
@given(left=segment_patterns(), right=segment_patterns())
def test_segment_patterns_intersect_exactly(left, right):
    names = ["".join(chars) for n in range(1, 5) for chars in itertools.product("abc", repeat=n)]
    witnessed = any(segment_matches(left, name) and segment_matches(right, name) for name in names)
    assert paths_overlap(left, right) == witnessed


LONG_TOKENS = ["a", "b", "c", "?", "*", "[ab]", "[!a]", "[b-c]"]


@st.composite
def long_segment_patterns(draw):
    tokens = draw(st.lists(st.sampled_from(LONG_TOKENS), min_size=1, max_size=7))
    return "".join(tokens)


def token_sets(pattern: str) -> list[set[str] | None]:
    """The pattern's tokens over the alphabet a, b, c, d (d standing for every other
    character): a set of characters, or None for a star."""
    sets: list[set[str] | None] = []
    for token in re.findall(r"\[!?[^]]+\]|\*|\?|[^[*?]", pattern):
        if token == "*":
            sets.append(None)
        elif token == "?":
            sets.append(set("abcd"))
        elif token.startswith("[!"):
            sets.append(set("abcd") - {c for c in "abcd" if re.fullmatch(f"[{token[2:]}", c)})
        elif token.startswith("["):
            sets.append({c for c in "abcd" if re.fullmatch(token, c)})
        else:
            sets.append({token})
    return sets


def oracle_intersect(left: str, right: str) -> bool:
    """An independent reading: breadth-first search of the two patterns' product automaton
    over a, b, c, d, for a common non-empty name."""
    a, b = token_sets(left), token_sets(right)

    def closure(tokens, i):
        while i < len(tokens) and tokens[i] is None:
            yield i
            i += 1
        yield i

    def step(tokens, i, char):
        if i < len(tokens):
            if tokens[i] is None:
                yield i
            elif char in tokens[i]:
                yield i + 1

    start = {(i, j, False) for i in closure(a, 0) for j in closure(b, 0)}
    seen, frontier = set(start), list(start)
    while frontier:
        i, j, consumed = frontier.pop()
        if consumed and i == len(a) and j == len(b):
            return True
        for char in "abcd":
            for ni in step(a, i, char):
                for nj in step(b, j, char):
                    for ci in closure(a, ni):
                        for cj in closure(b, nj):
                            state = (ci, cj, True)
                            if state not in seen:
                                seen.add(state)
                                frontier.append(state)
    return False


@settings(max_examples=300, deadline=None)
@given(left=long_segment_patterns(), right=long_segment_patterns())
def test_longer_segment_patterns_intersect_exactly(left, right):
    witnessed = oracle_intersect(left, right)
    assert paths_overlap(left, right) == witnessed
    assert paths_overlap(right, left) == witnessed


def test_the_product_oracle_agrees_with_brute_force_on_small_patterns():
    for left, right in itertools.product(["a*", "*b", "?", "[!a]*", "*[b-c]?", "**"[:1]], repeat=2):
        names = ("".join(c) for n in range(1, 5) for c in itertools.product("abcd", repeat=n))
        brute = any(segment_matches(left, x) and segment_matches(right, x) for x in names)
        assert oracle_intersect(left, right) == brute, (left, right)


def test_big_pattern_pairs_are_decided_exactly():
    # Once judged "too big to compare" and counted as a conflict; now decided.
    assert not paths_overlap("x" + "*a" * 40 + "b", "y" + "*a" * 40 + "c")
    assert not paths_overlap("*a" * 40 + "b", "*a" * 40 + "c")
    assert paths_overlap("*a" * 40 + "b", "a" * 40 + "*b")
    assert not paths_overlap("?" * 60, "?" * 61)
    assert paths_overlap("?" * 60, "*" + "?" * 59)
    bomb = "".join(f"*{c}" for c in "abcdefghijklmnop")
    assert not paths_overlap(bomb + "*x1q", bomb + "*x2q")
    assert paths_overlap(bomb + "*x1q", bomb + "*1q")


def test_comparisons_are_paid_from_the_request_budget():
    left, right = "src/" + "?" * 30 + "z", "src/" + "?" * 32
    first = WorkBudget(10_000)
    assert not paths_overlap(left, right, first)
    spent = first.limit - first.left
    assert spent > 32  # the automaton ran over the 32 tokens
    again = WorkBudget(10_000)  # the same nominal cost when compiled segments are cached
    paths_overlap(left, right, again)
    assert again.limit - again.left == spent
    with pytest.raises(AppError) as exc:
        paths_overlap(left, right, WorkBudget(spent - 1))
    assert exc.value.code == "PATH_LOCK_PATTERN_TOO_COMPLEX"
    assert exc.value.detail == {"work_limit": spent - 1}


def test_character_classes_are_charged_for_what_they_cost():
    # Issue 9 review: a name matched by a pattern was charged its length only, though each
    # character is looked up in every class of the pattern; two classes are intersected in
    # time linear in their intervals, which was not charged either.
    budget = WorkBudget(10**7)
    assert not paths_overlap("[a-c]" * 8 + "*q", "b" * 8 + "x" * 200, budget)
    assert budget.limit - budget.left >= 208 * 8
    wide = "[acegikmoqsuwy]"  # 13 intervals
    budget = WorkBudget(10**7)
    assert paths_overlap(wide * 8 + "*b1", wide * 8 + "*1b1", budget)
    assert budget.limit - budget.left >= 8 * 8 * (13 + 13)


def test_the_compiled_pattern_caches_are_bounded_in_memory():
    # Issue 9 review: distinct hostile patterns grew the process-wide caches (~450 MB seen):
    # 8,192 compiled segments each keeping up to 512 character masks.
    import tracemalloc

    from locks_app import globs

    globs._segment.cache_clear()
    globs._tokenize.cache_clear()
    classes = "".join(f"[{chr(0x4E00 + 2 * k)}-{chr(0x4E01 + 2 * k)}]" for k in range(15))
    names = ["".join(chr(0x5000 + 211 * n + k) for k in range(200)) for n in range(2)]
    tracemalloc.start()
    try:
        for i in range(globs.CACHE_SEGMENTS + 100):
            pattern = f"*{classes}{i:05d}"[: globs.MAX_PATTERN_SEGMENT_CHARS]
            for name in names:
                segment_matches(pattern, name)
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert globs._segment.cache_info().currsize == globs.CACHE_SEGMENTS
    assert globs._tokenize.cache_info().currsize <= globs.CACHE_SEGMENTS
    assert max(len(globs._segment(f"*{classes}{i:05d}").masks) for i in range(5)) <= 64
    # ~20 KB per compiled segment at most: 1,024 of them in well under 64 MB.
    assert grown < 32_000_000, grown


def test_a_path_may_hold_sixteen_wildcards():
    sixteen = "".join(f"*{c}" for c in "abcdefghijklmno") + "*x"
    assert wildcard_count(sixteen) == 16
    assert path_normalize(sixteen).normalized_path == sixteen
    assert wildcard_count("src/**/[ab]?*.py") == 4
    for seventeen in (sixteen + "*y", "**/" * 16 + "*.py", "a/" + "?" * 17):
        with pytest.raises(AppError) as exc:
            path_normalize(seventeen)
        assert exc.value.code == "PATH_LOCK_PATTERN_TOO_COMPLEX"
        assert exc.value.detail["limit"] == 16


def test_the_issues_64_pattern_request_fits_the_budget_and_its_answers_are_right():
    bomb = "".join(f"*{c}" for c in "abcdefghijklmno")
    budget = WorkBudget()
    entries = paths_normalize([f"{bomb}*x{i}q" for i in range(64)], budget=budget)
    assert len(entries) == 64
    with pytest.raises(AppError) as exc:
        paths_normalize([f"{bomb}*x{i}q" for i in range(63)] + [f"{bomb}*7q"])
    assert exc.value.code == "PATH_LOCK_CONFLICT"


def test_unclosed_brackets_are_literals_and_tokenizing_them_is_linear():
    assert path_normalize("[" * 200).normalized_path == "[" * 200
    assert not is_pattern("[" * 200)
    assert segment_matches("[" * 100 + "*", "[" * 150)
