"""Glob patterns of lock paths, and when two lock entries overlap. Pure functions.

Glob patterns: a segment containing ``*``, ``?`` or a ``[…]`` class is a pattern. ``*`` matches
any run of characters and ``?`` one character, never ``/``; ``[abc]``, ``[a-z]`` and the negated
``[!a-z]`` / ``[^a-z]`` match one character (a ``]`` right after the opening bracket or
negation is a member; a ``[`` with no closing ``]`` is a literal). A whole segment of two or
more stars (``**``) matches zero or more segments. Names starting with ``.`` are matched like
any other. With case folding on, a pattern is folded like any path and then interpreted.

An entry *covers* every path it matches and everything below those paths. Two entries overlap
when some path is covered by both; for two concrete paths that is the reference rule (equal,
one a ``/``-prefix of the other, or either is ``.``). The test runs the two entries' automata
together (segments, and characters inside two pattern segments), so it is exact — for a
pattern against a concrete path always, and for two patterns unless a pair of pattern segments
is too big to compare (``MAX_INTERSECTION_STATES``), which then counts as overlapping. Paths
range over non-empty segments without ``/``, so a pattern that can only match an unlockable
name (``[.]``) still counts as matching it. A false conflict can arise only in these two
cases; a conflict is never missed. Matching is linear in the name (no backtracking).

A literal name containing glob characters is locked by escaping each of them as a one-member
class: ``report[[]1].txt`` names ``report[1].txt``, ``what[?].md`` names ``what?.md``,
``[*]`` names ``*``. (A ``]`` alone is a literal already.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from agentchat.core.errors import AppError
from agentchat.core.paths import WORKSPACE, path_segments, safe_text

INVALID_PATH = "PATH_LOCK_INVALID_PATH"
MAX_PATTERN_SEGMENT_CHARS = 128
# Two pattern segments whose product automaton would have more states than this are judged to
# intersect without looking (a false conflict is allowed between patterns, a miss never).
MAX_INTERSECTION_STATES = 4096

_GLOB_CHARS = frozenset("*?[")
_MAX_CODEPOINT = 0x10FFFF
_SLASH = ord("/")


def _invalid(message: str, path: Any) -> AppError:
    return AppError(INVALID_PATH, message, detail={"path": safe_text(path)})


# A segment is parsed into tokens: ("lit", char), ("any",), ("star",) or ("set", intervals)
# where intervals is a sorted tuple of disjoint (low, high) code point ranges. A character
# predicate is an interval set; "any" is the whole code space.

Intervals = tuple[tuple[int, int], ...]
_UNIVERSE: Intervals = ((0, _MAX_CODEPOINT),)


def has_glob(segment: str) -> bool:
    return any(char in _GLOB_CHARS for char in segment) and any(
        token[0] != "lit" for token in _tokens(segment)
    )


def is_pattern(normalized_path: str) -> bool:
    return any(has_glob(segment) for segment in _segments(normalized_path))


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    result: list[tuple[int, int]] = []
    for low, high in sorted(intervals):
        if result and low <= result[-1][1] + 1:
            result[-1] = (result[-1][0], max(result[-1][1], high))
        else:
            result.append((low, high))
    return tuple(result)


def _complement(intervals: Intervals) -> Intervals:
    result: list[tuple[int, int]] = []
    start = 0
    for low, high in intervals:
        if low > start:
            result.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CODEPOINT:
        result.append((start, _MAX_CODEPOINT))
    return tuple(result)


def _intersect(left: Intervals, right: Intervals) -> Intervals:
    result: list[tuple[int, int]] = []
    i = j = 0
    while i < len(left) and j < len(right):
        low = max(left[i][0], right[j][0])
        high = min(left[i][1], right[j][1])
        if low <= high:
            result.append((low, high))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return tuple(result)


def _has_segment_char(intervals: Intervals) -> bool:
    """Whether the set holds a character other than ``/`` (which no segment contains)."""
    return any(not (low == high == _SLASH) for low, high in intervals)


@lru_cache(maxsize=8192)
def _tokens(segment: str) -> tuple[tuple[Any, ...], ...]:
    return _tokenize(segment)[0]


@lru_cache(maxsize=8192)
def _tokenize(segment: str) -> tuple[tuple[tuple[Any, ...], ...], str | None]:
    """(tokens, problem): a reversed range such as ``[z-a]`` matches nothing and is reported
    as a problem (validation refuses it); parsing itself never fails."""
    tokens: list[tuple[Any, ...]] = []
    problem: str | None = None
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            if not tokens or tokens[-1] != ("star",):
                tokens.append(("star",))
            i += 1
        elif char == "?":
            tokens.append(("any",))
            i += 1
        elif char == "[":
            parsed = _parse_class(segment, i)
            if parsed is None:
                tokens.append(("lit", char))
                i += 1
            else:
                intervals, i, bad = parsed
                problem = problem or bad
                tokens.append(("set", intervals))
        else:
            tokens.append(("lit", char))
            i += 1
    return tuple(tokens), problem


def _parse_class(segment: str, start: int) -> tuple[Intervals, int, str | None] | None:
    """Parse ``[…]`` at ``start``: (intervals, index after it, problem), None when unclosed."""
    j = start + 1
    negated = j < len(segment) and segment[j] in "!^"
    if negated:
        j += 1
    members: list[tuple[int, int]] = []
    problem: str | None = None
    first = True
    while j < len(segment):
        char = segment[j]
        if char == "]" and not first:
            intervals = _merge(members)
            return (_complement(intervals) if negated else intervals), j + 1, problem
        first = False
        if j + 2 < len(segment) and segment[j + 1] == "-" and segment[j + 2] != "]":
            low, high = ord(char), ord(segment[j + 2])
            if low > high:
                problem = problem or f"empty character range {char}-{segment[j + 2]}"
            else:
                members.append((low, high))
            j += 3
        else:
            members.append((ord(char), ord(char)))
            j += 1
    return None


def pattern_segment_check(segment: str, raw: str) -> None:
    """Raises PATH_LOCK_INVALID_PATH for an over-long pattern segment or a broken class."""
    if len(segment) > MAX_PATTERN_SEGMENT_CHARS:
        raise _invalid(
            f"pattern segments may be at most {MAX_PATTERN_SEGMENT_CHARS} characters", raw
        )
    tokens, problem = _tokenize(segment)
    if problem:
        raise _invalid(f"invalid glob pattern: {problem}", raw)
    for token in tokens:
        if token[0] == "set" and not _has_segment_char(token[1]):
            raise _invalid("invalid glob pattern: a character class that matches nothing", raw)


def _is_globstar(segment: str) -> bool:
    return len(segment) >= 2 and set(segment) == {"*"}


def _segments(normalized_path: str) -> tuple[str, ...]:
    return tuple(path_segments(normalized_path))


def _token_chars(token: tuple[Any, ...]) -> Intervals:
    kind = token[0]
    if kind == "lit":
        return ((ord(token[1]), ord(token[1])),)
    if kind == "set":
        return token[1]
    return _UNIVERSE  # "any" and "star" consume any one character


def _char_in(intervals: Intervals, code: int) -> bool:
    low_index, high_index = 0, len(intervals)
    while low_index < high_index:
        mid = (low_index + high_index) // 2
        low, high = intervals[mid]
        if code < low:
            high_index = mid
        elif code > high:
            low_index = mid + 1
        else:
            return True
    return False


class _Matcher:
    """A segment pattern run as a bit-parallel NFA (shift-and): linear in the name's length,
    whatever the pattern (no backtracking, so no catastrophic cases)."""

    def __init__(self, segment: str) -> None:
        self.tokens = _tokens(segment)
        self.stars = 0
        for position, token in enumerate(self.tokens):
            if token[0] == "star":
                self.stars |= 1 << position
        self.accept = 1 << len(self.tokens)
        self.masks: dict[str, int] = {}

    def _closure(self, state: int) -> int:
        # Consecutive stars are merged when parsing, so one step reaches past every star.
        return state | ((state & self.stars) << 1)

    def _mask(self, char: str) -> int:
        mask = self.masks.get(char)
        if mask is None:
            mask = 0
            for position, token in enumerate(self.tokens):
                if token[0] != "star" and _char_in(_token_chars(token), ord(char)):
                    mask |= 1 << position
            if len(self.masks) < 512:
                self.masks[char] = mask
        return mask

    def matches(self, name: str) -> bool:
        state = self._closure(1)
        for char in name:
            state = self._closure(
                ((state & ~self.stars & self._mask(char)) << 1) | (state & self.stars)
            )
            if not state:
                return False
        return bool(state & self.accept)


@lru_cache(maxsize=4096)
def _matcher(segment: str) -> _Matcher:
    return _Matcher(segment)


def segment_matches(pattern: str, name: str) -> bool:
    """Whether one segment pattern (or literal) matches one concrete segment name."""
    if not has_glob(pattern):
        return pattern == name
    return _matcher(pattern).matches(name)


@lru_cache(maxsize=16384)
def _segments_intersect(left: str, right: str) -> bool:
    """Whether two segment patterns match a common non-empty name (exact)."""
    if not has_glob(left):
        return segment_matches(right, left)
    if not has_glob(right):
        return segment_matches(left, right)
    a, b = _tokens(left), _tokens(right)
    if (len(a) + 1) * (len(b) + 1) > MAX_INTERSECTION_STATES:
        return True  # too costly to decide: judged conservatively, a conflict
    # Product of the two token automata; a state is (position in a, position in b). If both
    # can reach their ends together the languages share a string; sharing only "" would need
    # both to be all stars, which share every name as well.
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j = state
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i][0] == "star":
            stack.append((i + 1, j))
        if j < len(b) and b[j][0] == "star":
            stack.append((i, j + 1))
        if i == len(a) or j == len(b):
            continue
        ni = i if a[i][0] == "star" else i + 1
        nj = j if b[j][0] == "star" else j + 1
        if (ni, nj) == (i, j):
            continue  # two stars eating a character together make no progress
        if _has_segment_char(_intersect(_token_chars(a[i]), _token_chars(b[j]))):
            stack.append((ni, nj))
    return False


def paths_overlap(left: str, right: str) -> bool:
    """Whether two normalized entries cover a common path (symmetric; exact, see module doc).

    For concrete paths: equal, one a ``/``-prefix of the other, or either is ``.``.
    """
    if left == WORKSPACE or right == WORKSPACE:
        return True
    a, b = _segments(left), _segments(right)
    if not any(has_glob(s) for s in a) and not any(has_glob(s) for s in b):
        return left == right or left.startswith(right + "/") or right.startswith(left + "/")
    # Product of the two segment automata. A state (i, j) is reachable when some path is
    # matched by a[:i] and by b[:j]; once either side is complete, the other side's remainder
    # can always be completed (every segment pattern matches some name), so one matched path
    # lies below or at the other: they overlap.
    seen: set[tuple[int, int]] = set()
    stack = [(0, 0)]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        i, j = state
        if i == len(a) or j == len(b):
            return True
        star_a, star_b = _is_globstar(a[i]), _is_globstar(b[j])
        if star_a:
            stack.append((i + 1, j))
        if star_b:
            stack.append((i, j + 1))
        if star_a and star_b:
            continue  # both would stay put: no progress
        ni = i if star_a else i + 1
        nj = j if star_b else j + 1
        if star_a or star_b or _segments_intersect(a[i], b[j]):
            stack.append((ni, nj))
    return False


def path_covers(entry: str, path: str) -> bool:
    """Whether ``entry`` covers the concrete normalized ``path`` (matches it or an ancestor)."""
    return _matches_prefix(_segments(entry), _segments(path))


def _matches_prefix(pattern: Sequence[str], path: Sequence[str]) -> bool:
    # States: positions in the pattern reachable after consuming path[:k]; covered when the
    # pattern can be complete after some k.
    states = _closure({0}, pattern)
    for name in path:
        if len(pattern) in states:
            return True
        nxt: set[int] = set()
        for i in states:
            if i < len(pattern):
                if _is_globstar(pattern[i]):
                    nxt.add(i)
                elif segment_matches(pattern[i], name):
                    nxt.add(i + 1)
        states = _closure(nxt, pattern)
        if not states:
            return False
    return len(pattern) in states


def _closure(states: set[int], pattern: Sequence[str]) -> set[int]:
    result = set(states)
    stack = list(states)
    while stack:
        i = stack.pop()
        if i < len(pattern) and _is_globstar(pattern[i]) and i + 1 not in result:
            result.add(i + 1)
            stack.append(i + 1)
    return result
