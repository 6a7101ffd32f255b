"""The registry's pure rules: statuses, staleness, generated ids, the post rate's spelling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentchat.core.rules.names import is_agent_name
from agentchat.core.rules.presence import (
    Rate,
    agent_id_generate,
    is_live,
    model_slug,
    namespace_root,
    presence_status,
    rate_parse,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "rate"),
    [
        ("10/min", Rate(10, 60)),
        ("10/minute", Rate(10, 60)),
        ("600/h", Rate(600, 3600)),
        ("5/10s", Rate(5, 10)),
        ("1/days", Rate(1, 86400)),
        (" 3/SEC ", Rate(3, 1)),
        ("", None),
    ],
)
def test_rate_spellings(spec, rate):
    assert rate_parse(spec) == rate


@pytest.mark.parametrize(
    "spec", ["10", "10/", "/min", "0/min", "10/0s", "-1/min", "10/fortnight", "1e3/min", "10/min/h"]
)
def test_bad_rates_are_refused(spec):
    with pytest.raises(ValueError):
        rate_parse(spec)


def test_stale_past_the_threshold_and_idle_or_stale_frees_the_slot():
    fresh, old = NOW - timedelta(seconds=300), NOW - timedelta(seconds=301)
    assert presence_status("active", fresh, now=NOW, stale_seconds=300) == "active"
    assert presence_status("sleeping", old, now=NOW, stale_seconds=300) == "stale"
    assert is_live("active", fresh, now=NOW, stale_seconds=300)
    assert is_live("sleeping", fresh, now=NOW, stale_seconds=300)
    assert not is_live("idle", fresh, now=NOW, stale_seconds=300)
    assert not is_live("active", old, now=NOW, stale_seconds=300)


def test_generated_ids_have_the_eps_shape_and_obey_the_name_rule():
    name = agent_id_generate(
        parent="alice",
        harness="Claude Code",
        substrate="",
        conversation_id="c1",
        random_hex="4f9a00000000",
    )
    assert name == "alice.claude_code_d0f631ca_4f9a00000000"
    for parent in ("a", "a" * 30, "a" * 41):
        made = agent_id_generate(parent=parent, harness="x" * 99, substrate="", conversation_id="")
        assert made is not None and is_agent_name(made) and len(made) <= 64
    assert agent_id_generate(parent="a" * 43, harness="h", substrate="", conversation_id="") is None
    assert model_slug("", "") == "agent"
    assert model_slug("h", "GPT-5 (high)") == "gpt_5_high"
    assert model_slug("---", "") == "agent"


def test_namespaces():
    assert namespace_root("alice.critic.deep") == "alice"
    # in_namespace is agentchat.relevance's (the client's too): tests/project/test_relevance.py
