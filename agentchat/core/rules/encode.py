"""JSON as every surface writes it."""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import JSONRenderer

_renderer = JSONRenderer()


def json_bytes(data: Any) -> bytes:
    """The bytes DRF's JSON renderer writes for ``data`` (compact, UTF-8, U+2028/9 escaped), so a
    response assembled from parts reads exactly like one DRF rendered. Raises on what JSON
    cannot carry (a lone surrogate, NaN)."""
    return _renderer.render(data)
