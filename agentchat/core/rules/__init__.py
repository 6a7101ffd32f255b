"""Rules: the floor's pure ground, what every layer above may use.

What belongs here: the one error table and its renderer (``errors``), JSON as every surface
writes it (``encode``), the rules of names, workspace paths, hostile input (``validation``) and
record spellings and expiry (``records``), the statuses reserved for the server's audit
messages (``audit``), and the one clock. Functions of their arguments (and
of settings and the clock): no database, no request, no channel layer.

May import: the standard library, Django's and DRF's plain utilities (settings, timezone,
``HttpResponse``, ``JSONRenderer``), and each other. Nothing else of agentchat (a contract in
pyproject.toml).
"""
