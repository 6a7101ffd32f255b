"""The benchmarks' report: figures spelled for a table, ratios, targets with a verdict, and the
table itself.

    from report import Report, fmt, fmt_ratio, print_table, ratio
"""

from __future__ import annotations

from typing import Any


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = (
            f"{value:,.0f}"
            if abs(value) >= 100
            else f"{value:.1f}"
            if abs(value) >= 10
            else (f"{value:.2f}")
        )
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{text}{unit}"


def fmt_ratio(value: float | None, suffix: str = "") -> str:
    """``2.50x``; below 0.1 as a fraction (``1/270x``), which reads better than ``0.00x``."""
    if value is None:
        return "-"
    if 0 < value < 0.1:
        return f"1/{1 / value:,.0f}x{suffix}"
    return f"{value:.2f}x{suffix}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "PASS" if ok else "MISS"


class Report:
    """Rows of a table (measure, ours, reference, ratio, target, verdict) and the targets'
    outcomes by key."""

    HEADER = ["measure", "ours", "reference CLI", "ours/ref", "target", "ok?"]

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.checks: dict[str, Any] = {}

    def row(
        self,
        label: str,
        ours: str,
        ref: str = "",
        rat: str = "",
        target: str = "",
        ok: bool | None = None,
        key: str | None = None,
    ) -> None:
        self.rows.append([label, ours, ref, rat, target, verdict(ok) if target else ""])
        if key and target:
            self.checks[key] = {"target": target, "ok": ok}


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))
