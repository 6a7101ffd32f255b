"""A client of the Agent Chat protocol v1, written from the HTTP v1 document alone
(``004_…txt`` in the shared seeds): its paths, its request shapes, its cursor rules. It imports
nothing of this project (the standard library only), so that a test with it shows that a client
written against the document works against this server unchanged.

What it knows, each from the document:

- ``POST /v1/agents/<id>/messages`` with ``to``, ``conversation_id``, ``correlation_id``,
  ``text``, ``data``, ``content_type``, ``metadata`` (and a stable ``id`` for deduplication);
  the returned envelope;
- ``PUT /v1/agents/<id>/contacts/<cid>`` (a card), ``POST /v1/agents/<id>/contact-shares``
  (``to``, ``contact_id``, ``conversation_id``), ``POST …/contact-shares/<msg_id>/accept``;
- ``POST /v1/agents/<id>/receipts`` (``to``, ``message_id``, ``status``, ``detail``,
  ``conversation_id``);
- ``GET /v1/agents/<id>/inbox?cursor=&limit=`` → ``deliveries``, ``next_cursor`` (the next
  record's sequence number), ``tail``;
- ``GET /v1/monitor?cursor=&limit=`` with the admin token → ``deliveries`` (each with ``inbox``,
  ``cursor``, ``seq_num``, ``timestamp``, ``envelope``), ``next_cursor`` (opaque: passed back
  unchanged), ``tails``;
- live follow: ``Accept: text/event-stream`` (or ``follow=true``) on the inbox and the monitor;
  each event ``event: envelope``, ``id:`` the next cursor, ``data:`` one delivery; a reconnect
  sends the last ``id`` as ``Last-Event-ID`` (or ``cursor=``). The event stream is parsed as
  Server-Sent Events are (lines, ``:`` comments, ``field: value``, a blank line dispatches).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class ProtocolError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class AgentChat:
    """One agent's (or, with the admin token, the monitor's) view of a server."""

    def __init__(self, base_url: str, token: str, agent: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.agent = agent
        self.last_status = 0

    def _call(self, method: str, path: str, body: Any = None, query: dict | None = None) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                self.last_status = response.status
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            raw = error.read().decode("utf-8", "replace")
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw
            raise ProtocolError(error.code, parsed) from None

    def _agent_path(self, rest: str) -> str:
        assert self.agent is not None, "an agent client"
        return f"/v1/agents/{urllib.parse.quote(self.agent, safe='')}/{rest}"

    # --- messages ------------------------------------------------------------------------

    def send(self, to: str, **fields: Any) -> dict[str, Any]:
        """fields: conversation_id, correlation_id, text, data, content_type, metadata, id."""
        return self._call("POST", self._agent_path("messages"), {"to": to, **fields})

    def receipt(
        self,
        to: str,
        message_id: str,
        status: str,
        detail: str | None = None,
        conversation_id: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"to": to, "message_id": message_id, "status": status}
        if detail is not None:
            body["detail"] = detail
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        return self._call("POST", self._agent_path("receipts"), body)

    # --- contacts ------------------------------------------------------------------------

    def save_contact(self, card: dict[str, Any]) -> Any:
        path = self._agent_path("contacts/" + urllib.parse.quote(card["id"], safe=""))
        return self._call("PUT", path, card)

    def share_contact(
        self, to: str, contact_id: str, conversation_id: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"to": to, "contact_id": contact_id}
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        return self._call("POST", self._agent_path("contact-shares"), body)

    def accept_share(self, message_id: str) -> Any:
        path = self._agent_path(f"contact-shares/{urllib.parse.quote(message_id, safe='')}/accept")
        return self._call("POST", path)

    # --- replay --------------------------------------------------------------------------

    def inbox(self, cursor: int = 0, limit: int = 100) -> dict[str, Any]:
        return self._call(
            "GET", self._agent_path("inbox"), query={"cursor": cursor, "limit": limit}
        )

    def replay(self, cursor: int = 0, limit: int = 100) -> tuple[list[dict[str, Any]], int]:
        """Every delivery from ``cursor`` on, page after page; returns them and the cursor to
        resume from (the last page's ``next_cursor``)."""
        deliveries: list[dict[str, Any]] = []
        while True:
            page = self.inbox(cursor, limit)
            deliveries += page["deliveries"]
            cursor = page["next_cursor"]
            if not page["deliveries"] or cursor >= page["tail"]:
                return deliveries, cursor

    def monitor(self, cursor: str | None = None, limit: int = 100) -> dict[str, Any]:
        query: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            query["cursor"] = cursor
        return self._call("GET", "/v1/monitor", query=query)

    # --- live follow (Server-Sent Events) -------------------------------------------------

    def follow_inbox(
        self, cursor: int | None = None, last_event_id: str | None = None, timeout: float = 30
    ) -> EventStream:
        query = {} if cursor is None else {"cursor": cursor}
        return self._follow(self._agent_path("inbox"), query, last_event_id, timeout)

    def follow_monitor(
        self, cursor: str | None = None, last_event_id: str | None = None, timeout: float = 30
    ) -> EventStream:
        query = {} if cursor is None else {"cursor": cursor}
        return self._follow("/v1/monitor", query, last_event_id, timeout)

    def _follow(
        self, path: str, query: dict[str, Any], last_event_id: str | None, timeout: float
    ) -> EventStream:
        parsed = urllib.parse.urlsplit(self.base_url)
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            raw = response.read().decode("utf-8", "replace")
            connection.close()
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw
            raise ProtocolError(response.status, body)
        return EventStream(connection, response)


@dataclass
class Event:
    event: str = "message"
    id: str | None = None
    data: str = ""

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class EventStream:
    """An open event stream: ``next_event()`` the next event, ``comments`` those seen (such as
    a heartbeat), ``last_event_id`` what a reconnect sends."""

    connection: http.client.HTTPConnection
    response: http.client.HTTPResponse
    comments: list[str] = field(default_factory=list)
    last_event_id: str | None = None

    @property
    def content_type(self) -> str:
        return (self.response.getheader("Content-Type") or "").split(";")[0].strip()

    def next_event(self) -> Event | None:
        """The next event dispatched; None once the server ended the stream. Raises
        TimeoutError when nothing came within the connection's timeout."""
        event, data, seen = Event(), [], False
        while True:
            raw = self.response.readline()
            if not raw:
                return None
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if seen:
                    event.data = "\n".join(data)
                    if event.id is not None:
                        self.last_event_id = event.id
                    return event
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            seen = True
            if name == "event":
                event.event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                event.id = value

    def events(self) -> Iterator[Event]:
        while (event := self.next_event()) is not None:
            yield event

    def close(self) -> None:
        self.connection.close()
