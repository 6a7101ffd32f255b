"""Django's database sessions, with session keys of the shape Django makes.

A session key comes from a cookie, which any client writes: Django only checks that it has 8
characters, so ``sessionid=aaaaaaaa\\x00b`` reached the database, which PostgreSQL refuses in
text (a 500 on every admin page and websocket handshake that carried it). A key that is not
what Django generates (ASCII letters and digits, at most the column's 40) is no session.
"""

from __future__ import annotations

from typing import Any

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

SESSION_KEY_MAX = 40


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: Any) -> bool:
        return (
            isinstance(key, str)
            and 8 <= len(key) <= SESSION_KEY_MAX
            and key.isascii()
            and key.isalnum()
        )
