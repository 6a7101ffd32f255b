"""Daphne's request class, bounded and lighter: a body is refused while it arrives, and no
form is parsed. ``agentchat.serve`` installs it (``web_request_install``) before daphne starts.

Nothing of Django, daphne or Twisted is imported at module level: the launcher imports this.
"""

from __future__ import annotations

import io
from typing import Any

# After a 413 the server reads and drops what the client still sends, for this long and up
# to this many bytes, before it closes (see WebRequest._refuse).
LINGER_SECONDS = 2.0
LINGER_BYTES = 4 * 1024 * 1024


def web_request_install() -> None:
    """Daphne's request class, bounded and lighter (what daphne's HTTPFactory builds requests
    with):

    - **Bodies are bounded while they arrive.** Twisted reads a whole body before daphne hands
      the request to the application, spilling anything over 100 KB to a temporary file, so
      the application's limit (and its token check) came only after a client had sent all it
      liked: 300 MB without a token filled /tmp, a ``Content-Length`` of 1 GB held a
      connection. Here a declared length over AGENTCHAT_MAX_REQUEST_BYTES is refused before a
      byte of the body is read, and a body (chunked or not) that grows past it is refused when
      it does: 413 ``REQUEST_TOO_LARGE`` from the error table, then a lingering close (at most
      LINGER_SECONDS and LINGER_BYTES more). What is kept is kept in memory (at most the
      limit), never in a file.
    - **A request line or headers too long are answered.** Twisted reads the request line and
      each header as a line of at most 16 KiB, and the request line and headers together up
      to 16 KiB (``totalHeadersSize``): past the first it closed the connection without a
      word, past the second it answered a bare 400. Here a request line past either is 414
      ``REQUEST_LINE_TOO_LONG``, headers past either 431 ``HEADERS_TOO_LARGE``, with the error
      table's JSON body, then the same lingering close (``BoundedChannel``).
    - **A header or request HTTP refuses is answered as JSON.** Daphne checks every header
      name (an HTTP token) and value (no VT, FF, FS, GS, RS or NEL 0x85: a byte 0x85 in
      ``AgentChat-As`` was enough) and the target's ASCII, and Twisted the request line, each
      header line (a colon, no NUL/CR/LF, a Content-Length that is a number), their count and
      the chunks; both answered in their own way (daphne an HTML page, Twisted a bare status
      line). Here the same checks answer 400 ``INVALID_HEADER`` or ``MALFORMED_REQUEST`` (431
      ``HEADERS_TOO_LARGE`` past Twisted's count of headers) with the error table's JSON body,
      before the request reaches the application, a websocket's upgrade too.
    - **No form parsing.** Daphne hands the application the raw body and never reads Twisted's
      parsed form arguments, yet Twisted parses the Content-Type of every POST (about 0.2 ms of
      CPU per request on this machine kind, through the email package) and would decode a
      multipart or URL-encoded body into a second copy in memory. Twisted's request takes a
      flag for this.
    - **No Twisted access line.** Twisted's HTTP factory formats a combined-log line for every
      request and hands it to the Twisted log, which daphne sends nowhere (at its default
      verbosity); the access log is daphne's own (``--access-log``). About 3 % of a post's CPU.
    """
    from daphne import http_protocol
    from daphne.utils import HEADER_NAME_RE, INVALID_HEADER_VALUE_BYTES
    from django.conf import settings
    from twisted.web import http as twisted_http

    http: Any = twisted_http  # its HTTPChannel's private parts are untyped

    from agentchat.core.rules.encode import json_bytes
    from agentchat.core.rules.errors import error_body
    from agentchat.core.rules.validation import (
        headers_too_large,
        invalid_header,
        malformed_request,
        request_line_too_long,
        request_too_large,
    )

    limit = settings.AGENTCHAT_MAX_REQUEST_BYTES
    refusal = _answer(b"413 Content Too Large", error_body(request_too_large(limit)), json_bytes)
    head_limit = http.HTTPChannel.totalHeadersSize
    line_refusal = _answer(
        b"414 URI Too Long", error_body(request_line_too_long(head_limit)), json_bytes
    )
    headers_refusal = _answer(
        b"431 Request Header Fields Too Large",
        error_body(headers_too_large(head_limit)),
        json_bytes,
    )

    header_refusal = _answer(
        b"400 Bad Request", error_body(invalid_header("a header line is malformed")), json_bytes
    )
    malformed_refusal = _answer(
        b"400 Bad Request",
        error_body(malformed_request("the request line or the body's framing")),
        json_bytes,
    )

    def head_problem(request: Any) -> bytes | None:
        """The JSON answer to what daphne's ``process`` would refuse with its HTML page."""
        for name, values in request.requestHeaders.getAllRawHeaders():
            if not HEADER_NAME_RE.fullmatch(name):
                return _answer(
                    b"400 Bad Request",
                    error_body(invalid_header("a header's name is not a token")),
                    json_bytes,
                )
            if any(INVALID_HEADER_VALUE_BYTES.intersection(value) for value in values):
                return _answer(
                    b"400 Bad Request",
                    error_body(invalid_header("a header's value holds a forbidden byte")),
                    json_bytes,
                )
        if not request.uri.isascii():
            return _answer(
                b"400 Bad Request",
                error_body(malformed_request("the target is not ASCII")),
                json_bytes,
            )
        return None

    # daphne is untyped: its WebRequest is Any to the type checker.
    class WebRequest(http_protocol.WebRequest):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parsePOSTFormSubmission", False)
            self._body_size = 0
            self._refused = False
            self._discarded = 0
            super().__init__(*args, **kwargs)

        def gotLength(self, length: int | None) -> None:
            self.content = io.BytesIO()
            if length is not None and length > limit:
                self._refuse()

        def handleContentChunk(self, data: bytes) -> None:
            if self._refused:
                self._discarded += len(data)
                if self._discarded > LINGER_BYTES:
                    self.channel.loseConnection()
                return
            self._body_size += len(data)
            if self._body_size > limit:
                self._refuse()
                return
            self.content.write(data)

        def process(self) -> None:
            if self._refused:
                return
            problem = head_problem(self)
            if problem is not None:
                self._refused = True
                self.channel._answer_refuse(problem)
                return
            super().process()

        def _refuse(self) -> None:
            self._refused = True
            self.content = io.BytesIO()
            self.requestHeaders.removeHeader(b"Expect")  # no "100 Continue" after the answer
            channel = self.channel
            channel.transport.write(refusal)
            # A lingering close: closing outright with the body still arriving makes the
            # kernel answer it with a reset, which can reach the client before the 413 does.
            # So the write side closes after the answer, what still comes is read and dropped
            # (up to LINGER_BYTES), and the connection closes after LINGER_SECONDS at most.
            if hasattr(channel.transport, "loseWriteConnection"):
                channel.transport.loseWriteConnection()
            from twisted.internet import reactor

            # The reactor module is typed as its interface, whose methods declare no self.
            reactor.callLater(LINGER_SECONDS, channel.loseConnection)  # type: ignore[arg-type]

    http_protocol.WebRequest = WebRequest

    class BoundedChannel(http.HTTPChannel):  # type: ignore[misc]
        """Twisted's HTTP/1.1 channel, answering a request line or headers past its limits
        (a line of LineReceiver.MAX_LENGTH, all of them ``totalHeadersSize``) with the error
        table's 414 or 431 instead of closing or a bare 400; then it lingers as a 413 does."""

        _refused = False
        _discarded = 0
        _judging_header = False

        def _in_headers(self) -> bool:
            # Twisted's own flag (name-mangled): 1 or 2 until the request line is read.
            return not getattr(self, "_HTTPChannel__first_line", not self.requests)

        def _head_refuse(self) -> None:
            self._answer_refuse(headers_refusal if self._in_headers() else line_refusal)

        def _answer_refuse(self, answer: bytes) -> None:
            """Answer (the whole response, which closes) and linger as a 413 does."""
            self._refused = True
            self.transport.write(answer)
            if hasattr(self.transport, "loseWriteConnection"):
                self.transport.loseWriteConnection()
            from twisted.internet import reactor

            reactor.callLater(LINGER_SECONDS, self.loseConnection)  # type: ignore[arg-type]

        def dataReceived(self, data: bytes) -> None:
            if self._refused:
                self._discarded += len(data)
                if self._discarded > LINGER_BYTES:
                    self.loseConnection()
                return
            super().dataReceived(data)

        def lineReceived(self, line: bytes) -> None:
            if self._refused:
                return
            if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
                self._head_refuse()
                return
            super().lineReceived(line)

        def lineLengthExceeded(self, line: bytes) -> None:
            if not self._refused:
                self._head_refuse()

        def headerReceived(self, line: bytes) -> bool:
            self._judging_header = True
            try:
                return bool(super().headerReceived(line))
            finally:
                self._judging_header = False

        def _respondToBadRequestAndDisconnect(self) -> None:
            """Twisted's answer to what it cannot parse (a bare ``400`` line), as JSON: a
            header line's, past its count of headers 431, else the request line's or the
            chunks'."""
            if self._refused:
                return
            if self._receivedHeaderCount > self.maxHeaders:
                self._answer_refuse(headers_refusal)
            elif self._judging_header:
                self._answer_refuse(header_refusal)
            else:
                self._answer_refuse(malformed_refusal)

    def channel_protocol(factory: Any) -> Any:
        # What twisted's HTTPFactory.protocol makes (its _genericHTTPChannelProtocolFactory),
        # with the bounded channel inside.
        return http._GenericHTTPChannelProtocol(BoundedChannel())

    http_protocol.HTTPFactory.protocol = channel_protocol
    http_protocol.HTTPFactory.log = _no_access_line


def _no_access_line(factory: Any, request: Any) -> None:
    """Twisted's HTTPFactory.log: the access line daphne would drop."""


def _answer(status: bytes, body: Any, encode: Any) -> bytes:
    """A whole HTTP/1.1 answer that closes: ``status`` and the JSON ``body``."""
    data = encode(body)
    return (
        b"HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(data), data)
    )
