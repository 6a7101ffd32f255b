"""Glob patterns of lock paths, and when two lock entries overlap. Pure functions.

Glob patterns: a segment containing ``*``, ``?`` or a ``[…]`` class is a pattern. ``*`` matches
any run of characters and ``?`` one character, never ``/``; ``[abc]``, ``[a-z]`` and the negated
``[!a-z]`` / ``[^a-z]`` match one character (a ``]`` right after the opening bracket or
negation is a member; a ``[`` with no closing ``]`` is a literal). A whole segment of two or
more stars (``**``) matches zero or more segments. Names starting with ``.`` are matched like
any other. With case folding on, a pattern is folded like any path and then interpreted.

An entry *covers* every path it matches and everything below those paths. Two entries overlap
when some path is covered by both; for two concrete paths that is the reference rule (equal,
one a ``/``-prefix of the other, or either is ``.``). The test is exact. Paths range over
non-empty segments without ``/``, so a pattern that can only match an unlockable name
(``[.]``) still counts as matching it: the only kind of false conflict; a conflict is never
missed.

Cost (64 patterns such as ``*a*b*…*p*x1q`` once took 7.7 s on the only
database thread). Every step here is polynomial with a small constant, and a request pays for
its steps from a ``WorkBudget``:

* Two entries are walked segment by segment in lockstep: the first ``**`` on either side, or
  the end of either side, means they overlap (the ``**`` absorbs the other side's rest, each
  segment pattern matching some name), and a pair of segments with no common name means they
  do not. So at most ``min(len)`` segment pairs are compared.
* A segment pattern against a name runs as a bit-parallel NFA (shift-and): linear in the name.
* Two segment patterns are intersected bit-parallel too: the set of one pattern's positions is
  carried through the other's tokens (a ``*`` of the other takes the set to every position from
  its lowest on, since each token matches some character), so the cost is the second
  pattern's length times a mask computation, with no state explosion.
* A path may hold at most ``MAX_PATTERN_WILDCARDS`` wildcards (``*`` runs, ``?``, classes,
  ``**`` segments); more is refused with PATH_LOCK_PATTERN_TOO_COMPLEX.

A literal name containing glob characters is locked by escaping each of them as a one-member
class: ``report[[]1].txt`` names ``report[1].txt``, ``what[?].md`` names ``what?.md``,
``[*]`` names ``*``. (A ``]`` alone is a literal already.)
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.paths import WORKSPACE, path_segments, safe_text

MAX_PATTERN_SEGMENT_CHARS = 128
MAX_PATTERN_WILDCARDS = 16
# Steps of comparison one request may spend. A step took 0.3-1.3 µs on this project's 2-core
# machine (bench: shift-and runs over long names at the low end, class-heavy intersections at
# the high end), so a request spends at most ~65 ms of CPU here. 64 concrete paths cost ~2,000
# steps among themselves and none against the candidates; a leading-wildcard pattern such as
# "*.md" checked against 10,000 held paths in 100 folders ~20,000; crafted patterns run out.
MAX_REQUEST_WORK = 50_000

_MAX_CODEPOINT = 0x10FFFF
_SLASH = ord("/")


def _invalid(message: str, path: Any) -> AppError:
    return AppError("PATH_LOCK_INVALID_PATH", message, detail={"path": safe_text(path)})


class WorkBudget:
    """The comparison steps one request may still spend; past the limit the request is
    refused with PATH_LOCK_PATTERN_TOO_COMPLEX. Costs are nominal (what the comparison takes
    uncompiled), so whether a request passes never depends on the process's caches; only on
    the request and what is held. A pair of segments compared once in a request is looked up
    in ``memo`` the next time (one step): many held paths share their first segments."""

    __slots__ = ("left", "limit", "memo")

    def __init__(self, limit: int = MAX_REQUEST_WORK) -> None:
        self.limit = limit
        self.left = limit
        self.memo: dict[tuple[str, str], bool] | None = {}

    def grant(self, steps: int) -> None:
        """Raise the limit by ``steps`` (``locks_app.conflicts``: an allowance per held
        root-anchored pattern, which the requester does not pay for)."""
        self.limit += steps
        self.left += steps

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise AppError(
                "PATH_LOCK_PATTERN_TOO_COMPLEX",
                "comparing these paths with each other and with the locks held takes too much "
                "work: use fewer or more specific glob patterns",
                detail={"work_limit": self.limit},
            )


class _Unbounded(WorkBudget):
    def __init__(self) -> None:
        super().__init__(0)
        self.memo = None  # shared by every caller: it would only grow

    def spend(self, steps: int) -> None:
        return None


UNBOUNDED = _Unbounded()


# A segment is parsed into tokens: ("lit", char), ("any",), ("star",) or ("set", intervals)
# where intervals is a sorted tuple of disjoint (low, high) code point ranges. A character
# predicate is an interval set; "any" is the whole code space.

Intervals = tuple[tuple[int, int], ...]
_UNIVERSE: Intervals = ((0, _MAX_CODEPOINT),)


def _maybe_glob(text: str) -> bool:
    return "*" in text or "?" in text or "[" in text


def has_glob(segment: str) -> bool:
    return _maybe_glob(segment) and any(token[0] != "lit" for token in _tokens(segment))


def is_pattern(normalized_path: str) -> bool:
    return any(has_glob(segment) for segment in path_segments(normalized_path))


def wildcard_count(normalized_path: str) -> int:
    """``*`` runs, ``?``, classes and ``**`` segments of a normalized path."""
    count = 0
    for segment in path_segments(normalized_path):
        if _is_globstar(segment):
            count += 1
        elif has_glob(segment):
            count += sum(token[0] != "lit" for token in _tokens(segment))
    return count


def literal_anchor(normalized_path: str) -> str:
    """The segments before the first pattern segment (``.`` when there are none): every path
    an entry matches lies at or below its anchor, so two entries can overlap only when one's
    anchor is an ancestor of, or equal to, the other's. A concrete path is its own anchor."""
    anchor: list[str] = []
    for segment in path_segments(normalized_path):
        if _is_globstar(segment) or has_glob(segment):
            break
        anchor.append(segment)
    return "/".join(anchor) or WORKSPACE


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


# The compiled forms are cached per process, shared by every request: distinct hostile
# patterns would otherwise grow it (~450 MB was seen with 8,192 compiled segments of 128
# characters, each keeping 512 character masks). Bounded in entries and in what an entry keeps:
# CACHE_SEGMENTS segments, CACHE_CHAR_MASKS masks each (tests/locks_app/test_paths.py measures
# the worst case).
CACHE_SEGMENTS = 1024
CACHE_CHAR_MASKS = 64


def _tokens(segment: str) -> tuple[tuple[Any, ...], ...]:
    return _tokenize(segment)[0]


@lru_cache(maxsize=CACHE_SEGMENTS)
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
    # The class ends at the first "]" after its first member (a range never ends in "]"), so
    # an unclosed "[" is found with one scan and tokenizing stays linear in the segment.
    if j >= len(segment) or segment.find("]", j + 1) < 0:
        return None
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


class _Segment:
    """One segment, compiled. A pattern's token positions are bits: ``stars`` marks the
    ``*`` tokens, bit ``len(tokens)`` is acceptance; ``lit_masks`` maps a character to the
    positions of literal tokens equal to it, ``any_mask`` holds the ``?`` positions and
    ``classes`` the (bit, intervals) of each class."""

    __slots__ = (
        "accept",
        "any_mask",
        "class_intervals",
        "classes",
        "globstar",
        "head",
        "lit_masks",
        "literal",
        "literals",
        "masks",
        "stars",
        "tail",
        "text",
        "tokens",
    )

    def __init__(self, text: str) -> None:
        self.text = text
        self.globstar = _is_globstar(text)
        self.literal = not self.globstar and not has_glob(text)
        self.tokens: tuple[tuple[Any, ...], ...] = () if self.literal else _tokens(text)
        self.stars = 0
        self.any_mask = 0
        self.lit_masks: dict[str, int] = {}
        self.classes: list[tuple[int, Intervals]] = []
        for position, token in enumerate(self.tokens):
            bit = 1 << position
            if token[0] == "star":
                self.stars |= bit
            elif token[0] == "any":
                self.any_mask |= bit
            elif token[0] == "set":
                self.classes.append((bit, token[1]))
            else:
                self.lit_masks[token[1]] = self.lit_masks.get(token[1], 0) | bit
        self.literals = sum(token[0] == "lit" for token in self.tokens)
        self.class_intervals = sum(len(intervals) for _, intervals in self.classes)
        self.accept = 1 << len(self.tokens)
        self.head = _literal_run(self.tokens)
        self.tail = _literal_run(reversed(self.tokens))[::-1]
        self.masks: dict[str, int] = {}

    def _closure(self, state: int) -> int:
        # Consecutive stars are merged when parsing, so one step reaches past every star.
        return state | ((state & self.stars) << 1)

    def char_mask(self, char: str) -> int:
        """The non-star positions whose token accepts ``char``."""
        mask = self.masks.get(char)
        if mask is None:
            mask = self.lit_masks.get(char, 0) | self.any_mask
            code = ord(char)
            for bit, intervals in self.classes:
                if _char_in(intervals, code):
                    mask |= bit
            if len(self.masks) < CACHE_CHAR_MASKS:
                self.masks[char] = mask
        return mask

    def set_mask(self, intervals: Intervals) -> int:
        """The non-star positions whose token shares a segment character with ``intervals``
        (validation made every class hold one, so each ``?`` does)."""
        mask = self.any_mask
        for char, bits in self.lit_masks.items():
            if _char_in(intervals, ord(char)):
                mask |= bits
        for bit, own in self.classes:
            if _has_segment_char(_intersect(own, intervals)):
                mask |= bit
        return mask

    def matches(self, name: str) -> bool:
        state = self._closure(1)
        for char in name:
            state = self._closure(((state & self.char_mask(char)) << 1) | (state & self.stars))
            if not state:
                return False
        return bool(state & self.accept)

    def match_cost(self, name: str) -> int:
        """Per character, ``char_mask`` looks the character up in each class."""
        return 1 + len(name) * (1 + len(self.classes))

    def intersects(self, other: _Segment) -> bool:
        """Whether two segment patterns share a name. The set of this pattern's positions
        reachable together with ``other``'s position is carried through ``other``'s tokens;
        sharing only "" would need both to be all stars, which share every name as well."""
        everything = (self.accept << 1) - 1
        state = self._closure(1)
        for token in other.tokens:
            kind = token[0]
            if kind == "star":
                # Any run of characters: every position from the lowest reachable one on.
                state = everything & ~((state & -state) - 1)
                continue
            if kind == "lit":
                mask = self.char_mask(token[1])
            elif kind == "any":
                mask = (everything >> 1) & ~self.stars
            else:
                mask = self.set_mask(token[1])
            state = self._closure(((state & mask) << 1) | (state & self.stars))
            if not state:
                return False
        return bool(state & self.accept)

    def intersect_cost(self, other: _Segment) -> int:
        """Every token of ``other`` costs a step; a literal one looks its character up in each
        of this pattern's classes (``char_mask``), a class is compared with each literal and
        intersected with each class of this one, in time linear in both's intervals
        (``set_mask``)."""
        per_class = len(self.lit_masks) + self.class_intervals
        classes = len(other.classes) * per_class + len(self.classes) * other.class_intervals
        return 1 + len(other.tokens) + other.literals * len(self.classes) + classes

    def ends_compatible(self, other: _Segment) -> bool:
        """A quick necessary condition for sharing a name: the literal heads agree (one
        starts the other), and so do the literal tails."""
        return _compatible(self.head, other.head, prefix=True) and _compatible(
            self.tail, other.tail, prefix=False
        )


def _literal_run(tokens: Iterable[tuple[Any, ...]]) -> str:
    run = []
    for token in tokens:
        if token[0] != "lit":
            break
        run.append(token[1])
    return "".join(run)


def _compatible(left: str, right: str, *, prefix: bool) -> bool:
    """Whether two literal heads (or tails) can start (or end) one name."""
    if prefix:
        return left.startswith(right) or right.startswith(left)
    return left.endswith(right) or right.endswith(left)


@lru_cache(maxsize=CACHE_SEGMENTS)
def _segment(text: str) -> _Segment:
    return _Segment(text)


def segment_matches(pattern: str, name: str) -> bool:
    """Whether one segment pattern (or literal) matches one concrete segment name."""
    compiled = _segment(pattern)
    if compiled.literal:
        return pattern == name
    return compiled.matches(name)


def _segments_meet(left: _Segment, right: _Segment, budget: WorkBudget) -> bool:
    """Whether two non-globstar segments (literal or pattern) share a name."""
    if left.literal and right.literal:
        budget.spend(1)
        return left.text == right.text
    memo = budget.memo
    if memo is None:
        return _segments_decide(left, right, budget)
    pair = (left.text, right.text)
    known = memo.get(pair)
    if known is not None:
        budget.spend(1)
        return known
    known = memo[pair] = _segments_decide(left, right, budget)
    return known


def _segments_decide(left: _Segment, right: _Segment, budget: WorkBudget) -> bool:
    if left.literal:
        budget.spend(right.match_cost(left.text))
        return right.matches(left.text)
    if right.literal:
        budget.spend(left.match_cost(right.text))
        return left.matches(right.text)
    budget.spend(1 + min(len(left.head), len(right.head)) + min(len(left.tail), len(right.tail)))
    if not left.ends_compatible(right):
        return False
    budget.spend(left.intersect_cost(right))
    return left.intersects(right)


def first_is_globstar(segment: str) -> bool:
    return _is_globstar(segment)


def first_segments_meet(left: str, right: str, budget: WorkBudget = UNBOUNDED) -> bool:
    """Whether two non-globstar segments share a name: a necessary condition for two paths
    starting with them to overlap (``paths_overlap`` compares them first)."""
    return _segments_meet(_segment(left), _segment(right), budget)


def paths_overlap(left: str, right: str, budget: WorkBudget = UNBOUNDED) -> bool:
    """Whether two normalized entries cover a common path (symmetric; exact, see module doc).

    For concrete paths: equal, one a ``/``-prefix of the other, or either is ``.``.
    Raises PATH_LOCK_PATTERN_TOO_COMPLEX when ``budget`` runs out.
    """
    budget.spend(1)
    if left == WORKSPACE or right == WORKSPACE:
        return True
    if not _maybe_glob(left) and not _maybe_glob(right):
        return left == right or left.startswith(right + "/") or right.startswith(left + "/")
    a, b = left.split("/"), right.split("/")
    for name_a, name_b in zip(a, b, strict=False):
        seg_a, seg_b = _segment(name_a), _segment(name_b)
        if seg_a.globstar or seg_b.globstar:
            return True
        if not _segments_meet(seg_a, seg_b, budget):
            return False
    # One side is complete: what it matched lies at or above what the other side can match.
    return True
