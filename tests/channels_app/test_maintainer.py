"""A channel that names a maintainer (SPEC §9 governance) is changed by the maintainer only:
anyone else who sees it gets 403 CHANNEL_NOT_MAINTAINER and nothing changes. Without one,
anyone who sees it may, as in the reference."""

from __future__ import annotations

import pytest

from channels_app.models import Channel, Message

pytestmark = pytest.mark.django_db
URL = "/api/v1/channels/gov/"


@pytest.fixture
def governed(api_for):
    alice = api_for("alice")
    r = alice.post(
        "/api/v1/channels/",
        {"name": "gov", "members": ["alice", "bob", "mia"], "visibility": "members"},
        format="json",
    )
    assert r.status_code == 201, r.content
    Channel.objects.filter(name="gov").update(maintainer="mia")


def rows():
    channel = Channel.objects.get(name="gov")
    return (channel.topic, channel.members, channel.visibility, Message.objects.count())


@pytest.mark.parametrize(
    "body",
    [{"topic": "mine"}, {"members": ["bob", "mia"]}, {"visibility": "open"}, {"topic": ""}],
)
def test_a_member_who_is_not_the_maintainer_changes_nothing(api_for, governed, body):
    before = rows()
    r = api_for("bob").patch(URL, body, format="json")
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "CHANNEL_NOT_MAINTAINER"
    assert r.json()["error"]["detail"] == {"channel": "gov", "maintainer": "mia", "actor": "bob"}
    assert rows() == before


def test_the_maintainer_changes_it(api_for, governed):
    r = api_for("mia").patch(URL, {"members": ["alice", "mia"], "topic": "v2"}, format="json")
    assert r.status_code == 200, r.content
    assert (r.json()["members"], r.json()["topic"]) == (["alice", "mia"], "v2")


def test_without_a_maintainer_a_member_still_may(api_for, governed):
    Channel.objects.filter(name="gov").update(maintainer="")
    r = api_for("bob").patch(URL, {"topic": "ours"}, format="json")
    assert (r.status_code, r.json()["topic"]) == (200, "ours")
