"""The CLI's direct-message commands of the HTTP v1 protocol (docs/http-v1.md): ``send``,
``receipt`` and ``contacts`` (list, ``show``, ``save``, ``share``, ``accept``).

Each acts as the token's agent under ``/v1/agents/<agent>/`` (``Client.v1_*``). What they
print is one terminal-safe line per result (``--json``: the server's body as it came, the
address book's pages as one body with ``"more": false``); an error is the one stderr line of
every command, with the CLI's exit families (``AGENT_NOT_FOUND``, ``MESSAGE_NOT_FOUND``,
``CONTACT_NOT_FOUND``: 1; a malformed argument: ``USAGE``, 2). The inbox and the monitor are
other commands' (``agentchat inbox``, ``agentchat monitor``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.errors import ClientError
from agentchat.client.files import read_bounded
from agentchat.client.safe import line
from agentchat.client.verbs import answer_out, dump, out, out_json

RECEIPT_STATUSES = ("delivered", "processed", "read", "rejected")
CARD_MAX_BYTES = 768 * 1024  # the server's body limit
CONTACT_PAGES_MAX = 1000  # pages of the address book followed (100 cards each) at the most


def _usage(message: str) -> ClientError:
    return ClientError("USAGE", message)


def _json_value(raw: str, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _usage(f"{what} is not JSON: {exc}") from exc


def _metadata(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _usage(f"--meta takes KEY=VALUE, not {item!r}")
        found[key] = value
    return found


def _conversation(envelope: dict[str, Any]) -> str:
    conversation = envelope.get("conversation_id")
    return f" (conversation {line(conversation)})" if conversation else ""


def cmd_send(client: Client, args: argparse.Namespace) -> None:
    data = _json_value(args.data, "--data") if args.data is not None else None
    answer = client.v1_send(
        args.to,
        args.text,
        envelope_id=args.id,
        conversation_id=args.conversation_id,
        correlation_id=args.correlation_id,
        data=data,
        content_type=args.content_type,
        metadata=_metadata(args.meta),
        raw=args.json,
    )
    answer_out(
        args, answer, lambda a: f"sent {line(a['id'])} -> {line(a['to'])}{_conversation(a)}\n"
    )


def cmd_receipt(client: Client, args: argparse.Namespace) -> None:
    if args.status not in RECEIPT_STATUSES:
        raise _usage(f"status must be one of {', '.join(RECEIPT_STATUSES)}, not {args.status!r}")
    answer = client.v1_receipt(
        args.message_id,
        args.status,
        to=args.to,
        detail=args.detail,
        conversation_id=args.conversation_id,
        envelope_id=args.id,
        raw=args.json,
    )
    status, message_id = line(args.status), line(args.message_id)
    answer_out(
        args,
        answer,
        lambda a: f"receipt {line(a['id'])} -> {line(a['to'])}: {status} for {message_id}\n",
    )


def cmd_contacts(client: Client, args: argparse.Namespace) -> None:
    """The address book, every page: one card a line (``ID  DISPLAY NAME  ENDPOINT``)."""
    cards: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(CONTACT_PAGES_MAX):
        page = client.v1_contacts(after=after)
        cards.extend(page["contacts"])
        if not page.get("more") or not page["contacts"]:
            break
        following = page.get("next")
        if not isinstance(following, str) or following == after:
            raise ClientError("BAD_RESPONSE", "the address book's pages say more but do not go on")
        after = following
    if args.json:
        return dump({"contacts": cards, "more": False})
    if not cards:
        return out("(no contacts yet)\n")
    rows = [
        (line(card["id"]), line(card.get("display_name") or "-"), line(card.get("endpoint") or "-"))
        for card in cards
    ]
    widths = [max(len(row[i]) for row in [("ID", "NAME", "ENDPOINT"), *rows]) for i in range(2)]
    for row in [("ID", "NAME", "ENDPOINT"), *rows]:
        out(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}\n")


def cmd_contacts_show(client: Client, args: argparse.Namespace) -> None:
    path = client.v1_path(f"contacts/{seg(args.contact_id)}")
    answer = client.request("GET", path, raw=args.json, expect=shapes.CONTACT_CARD)
    if args.json:
        return out_json(answer)
    body: dict[str, Any] = answer
    for key in ("id", "display_name", "endpoint", "public_key"):
        out(f"{key}: {line(body.get(key) if body.get(key) is not None else '-')}\n")
    out(f"capabilities: {line(', '.join(map(str, body.get('capabilities') or [])) or '-')}\n")
    labels = body.get("labels") or {}
    shown = ", ".join(f"{k}={v}" for k, v in labels.items()) if isinstance(labels, dict) else ""
    out(f"labels: {line(shown or '-')}\n")


def _card(source: str) -> dict[str, Any]:
    """The card of a file, or of stdin (``-``): a JSON object."""
    raw = read_bounded(
        source,
        CARD_MAX_BYTES,
        unreadable=("BODY_UNREADABLE", f"could not read the card {source}"),
        too_large=("FIELD_TOO_LARGE", f"the card {source} is over {CARD_MAX_BYTES} bytes"),
        dash_is_stdin=True,
    )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientError("BODY_UNREADABLE", f"the card {source} is not UTF-8: {exc}") from exc
    card = _json_value(text, f"the card {source}")
    if not isinstance(card, dict):
        raise _usage(f"the card {source} is not a JSON object")
    return card


def cmd_contacts_save(client: Client, args: argparse.Namespace) -> None:
    answer = client.v1_contact_put(_card(args.card), raw=args.json)
    answer_out(args, answer, lambda a: f"saved contact {line(a['id'])}\n")


def cmd_contacts_share(client: Client, args: argparse.Namespace) -> None:
    answer = client.v1_contact_share(
        args.to, args.contact_id, conversation_id=args.conversation_id, raw=args.json
    )
    shared = f"shared contact {line(args.contact_id)}"
    answer_out(
        args, answer, lambda a: f"{shared} -> {line(a['to'])} ({line(a['id'])}){_conversation(a)}\n"
    )


def cmd_contacts_accept(client: Client, args: argparse.Namespace) -> None:
    answer = client.v1_contact_accept(args.message_id, raw=args.json)
    if args.json:
        return out_json(answer)
    source = answer.get("source") if isinstance(answer.get("source"), dict) else {}
    sender = source.get("from")
    origin = f" from {line(sender)}" if isinstance(sender, str) else ""
    out(f"accepted contact {line(answer['contact']['id'])}{origin} (event #{answer['seq_num']})\n")


def register(sub: Any, leaf: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``send``, ``receipt`` and ``contacts`` to the CLI's subparsers; ``leaf`` adds the
    flags every command takes (``--json``, ``--url``, …) to a command's own parser."""

    def command(
        parent: Any, name: str, func: Any, help_text: str, **kw: Any
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help_text, **kw)
        p.set_defaults(func=func)
        leaf(p)
        return p

    p = command(sub, "send", cmd_send, "send a direct message (an HTTP v1 envelope) to an agent")
    p.add_argument("to", help="the recipient agent")
    p.add_argument("text", help="the message's text")
    p.add_argument("--conversation-id", help="default: a new conversation")
    p.add_argument("--correlation-id")
    p.add_argument("--data", help="a JSON value carried beside the text")
    p.add_argument("--content-type", help="the data's content type")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata, repeatable")
    p.add_argument("--id", help="the envelope's id: a retry with it never sends twice")

    p = command(sub, "receipt", cmd_receipt, "answer a received message with a receipt")
    p.add_argument("message_id", help="the id of the envelope received")
    p.add_argument("status", metavar="STATUS", help="|".join(RECEIPT_STATUSES))
    p.add_argument("--detail", help="one line")
    p.add_argument("--to", help="the original's sender (only when two senders used the id)")
    p.add_argument("--conversation-id", help="default: the original's")
    p.add_argument("--id", help="the receipt's envelope id (idempotent retries)")

    contacts = command(sub, "contacts", cmd_contacts, "the address book (list, show, save, …)")
    csub = contacts.add_subparsers(dest="contacts_cmd", metavar="COMMAND")
    p = command(csub, "show", cmd_contacts_show, "show one card")
    p.add_argument("contact_id")
    p = command(csub, "save", cmd_contacts_save, "save a card (a JSON file, or - for stdin)")
    p.add_argument("card", help="card.json, or - to read stdin")
    p = command(csub, "share", cmd_contacts_share, "send a saved card to an agent")
    p.add_argument("to", help="the recipient agent")
    p.add_argument("contact_id", help="the card's id in your address book")
    p.add_argument("--conversation-id")
    p = command(csub, "accept", cmd_contacts_accept, "accept a contact share you received")
    p.add_argument("message_id", help="the contact.share envelope's id")
