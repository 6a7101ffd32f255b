"""Message search: every word of the query in the title or the body, newest first,
only where the searcher may see; on the database's full-text index (SQLite FTS5, PostgreSQL
to_tsvector), whatever the query says."""

from __future__ import annotations

import pytest
from django.db import connection

from agentchat.core.models import Agent
from channels_app import search, services
from channels_app.models import Channel

pytestmark = pytest.mark.django_db


@pytest.fixture
def rooms(api_for):
    alice = api_for("alice")
    for name in ("backend", "design"):
        alice.post("/api/v1/channels/", {"name": name}, format="json")
    backend, design = Channel.objects.get(name="backend"), Channel.objects.get(name="design")
    services.message_post(channel=backend, sender="alice", title="Deploy plan", body="canary first")
    services.message_post(
        channel=backend, sender="bob", title="Schema", body="the deploy is Friday"
    )
    services.message_post(channel=design, sender="dave", title="Colours", body="Déploiement: no")
    Agent.objects.get_or_create(name="carol")
    services.channel_create(
        name="secret", created_by="carol", members=["carol"], visibility="members"
    )
    services.message_post(
        channel=Channel.objects.get(name="secret"), sender="carol", title="deploy keys"
    )
    return alice


def found(client, **params) -> list[tuple[str, int]]:
    r = client.get("/api/v1/search/", params)
    assert r.status_code == 200, r.content
    return [(m["channel"], m["seq"]) for m in r.json()["results"]]


def test_every_word_in_title_or_body_newest_first_where_i_may_see(rooms, api_for):
    assert found(rooms, q="deploy") == [("backend", 2), ("backend", 1)]
    assert found(rooms, q="deploy friday") == [("backend", 2)]
    assert found(rooms, q="DEPLOY", channel="backend") == [("backend", 2), ("backend", 1)]
    assert found(rooms, q="deploy", channel="design") == []
    assert found(api_for("carol"), q="deploy keys") == [("secret", 1)]
    assert found(rooms, q="keys") == []  # carol's channel is not alice's to search
    r = rooms.get("/api/v1/search/", {"q": "deploy", "channel": "secret"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "CHANNEL_NOT_FOUND"


def test_the_index_is_the_databases_full_text_search(rooms):
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {search.FTS_TABLE}")
            assert cursor.fetchone()[0] == 4  # the triggers filled it
        # a prefix (the design message's "Déploiement" too: diacritics are folded)
        assert found(rooms, q="depl*") == [("design", 1), ("backend", 2), ("backend", 1)]
        assert found(rooms, q="deploiement") == [("design", 1)]  # diacritics folded
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexname FROM pg_indexes WHERE indexname = 'message_search_gin'"
            )
            assert cursor.fetchone() is not None
    # a channel deleted takes its rows out of the index
    Channel.objects.get(name="backend").delete()
    assert found(rooms, q="deploy") == []


@pytest.mark.parametrize(
    "query",
    ['"', "deploy OR", "NEAR(a b)", "a AND -b", "*", "title:deploy", "'); DROP TABLE x; --",
     "(((", "^a", "a\u0000b", "ünïcode 日本"],
)  # fmt: skip
def test_any_query_is_words_never_syntax(rooms, query):
    r = rooms.get("/api/v1/search/", {"q": query})
    assert r.status_code in (200, 400), r.content
    if r.status_code == 400:
        assert r.json()["error"]["code"] in ("INVALID_VALUE", "INVALID_TEXT")


@pytest.mark.parametrize(
    ("params", "code"),
    [({}, "INVALID_VALUE"), ({"q": "   "}, "INVALID_VALUE"), ({"q": "x" * 201}, "INVALID_VALUE"),
     ({"q": " ".join(["www"] * 9)}, "INVALID_VALUE"), ({"q": "a" * 65}, "INVALID_VALUE"),
     ({"q": "a", "limit": "0"}, "INVALID_VALUE"), ({"q": "a", "limit": "201"}, "INVALID_VALUE"),
     ({"q": "a", "channel": "bad name"}, "CHANNEL_NOT_FOUND")],
)  # fmt: skip
def test_bad_searches_are_400s_with_a_code(rooms, params, code):
    r = rooms.get("/api/v1/search/", params)
    assert r.status_code in (400, 404)
    assert r.json()["error"]["code"] == code


def test_the_limit_cuts_and_says_more(rooms):
    r = rooms.get("/api/v1/search/", {"q": "deploy", "limit": "1"}).json()
    assert (len(r["results"]), r["more"]) == (1, True)


@pytest.mark.parametrize("q", ["a*", "de* plan", "dep* pla* can*", "a* b* c* d* e* f* g* h*"])
def test_a_query_too_broad_is_refused(rooms, q):
    r = rooms.get("/api/v1/search/", {"q": q})
    assert r.status_code == 400, r.content
    error = r.json()["error"]
    assert (error["code"], error["detail"]["field"]) == ("SEARCH_TOO_BROAD", "q")


def test_prefixes_of_three_characters_are_searched(rooms):
    # A prefix on SQLite; PostgreSQL's search takes whole words (the * is dropped).
    expected = [("backend", 1)] if connection.vendor == "sqlite" else []
    assert found(rooms, q="dep* pla*") == expected
