"""HTTP: what stands between a request and a view, on every surface.

What belongs here: the API lane from ASGI straight to DRF (``lane``), the ASGI request checks
and helpers every surface before Django shares (``asgi_http``), authentication and origin
checks for the live endpoints (``scope``), the strict JSON parser, strict serializers and the one
exception handler (``rest``), paged lists (``pages``), the one rule for query parameters
(``query``), the OpenAPI document (``schema``) and its pages (``schema_views``), who the caller
is (``me``: ``GET /api/v1/me/``) and daphne's request class, bounded while a body arrives
(``webrequest``).

May import: every layer of the floor below it (``rules``, ``db``, ``live``, ``identity``),
Django, DRF, drf-spectacular. It is the floor's top: nothing of the floor imports it but
``apps.py`` (a contract in pyproject.toml).
"""
