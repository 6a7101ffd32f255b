"""One rule for query parameters: every operation of the API refuses a parameter it does not
declare with 400 UNKNOWN_FIELD, and what it declares is what the OpenAPI document says.

The routes are listed from the URL configuration (and the live endpoints' routing), so a new route
is covered without being named here."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from agentchat.core.http.schema import WAIT_PATH
from channels_app import routing
from channels_app.endpoints.wait import WAIT_PARAMETERS

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "patch", "delete")


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.callback


def api_routes() -> list[tuple[str, str, Any]]:
    """(route, method, view class) of every DRF operation under /api/v1/."""
    found = []
    for route, callback in _walk(get_resolver().url_patterns):
        view = getattr(callback, "view_class", None)
        if not route.startswith("api/v1/") or view is None:
            continue
        found += [(route, method, view) for method in METHODS if hasattr(view, method)]
    return found


ROUTES = api_routes()
GET_ROUTES = [route for route, method, _ in ROUTES if method == "get"]
WAIT_ROUTE = "api/v1/channels/<str:name>/wait/"


@pytest.fixture
def values(alice) -> dict[str, str]:
    """Path parameters naming objects that exist, so a request reaches its view."""
    assert alice.post("/api/v1/channels/", {"name": "qp"}, format="json").status_code == 201
    r = alice.post("/api/v1/channels/qp/tasks/", {"id": "T-1", "title": "t"}, format="json")
    assert r.status_code == 201
    r = alice.post("/api/v1/channels/qp/locks/", {"paths": ["src/a.py"]}, format="json")
    assert r.status_code == 201
    lock_id = r.json()["lock_id"]
    r = alice.put("/api/v1/channels/qp/whiteboard/goal/", {"value": 1}, format="json")
    assert r.status_code == 201
    return {"name": "qp", "task_id": "T-1", "lock_id": lock_id, "marker": "m-1", "key": "goal"}


def url(route: str, values: dict[str, str]) -> str:
    return "/" + re.sub(r"<str:(\w+)>", lambda m: values[m.group(1)], route)


def refused(response: Any, *names: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content)
    error = json.loads(response.content)["error"]
    assert error["code"] == "UNKNOWN_FIELD"
    assert error["detail"]["fields"] == sorted(names)


def test_the_routes_are_found():
    assert len(GET_ROUTES) >= 15
    assert "api/v1/channels/<str:name>/messages/" in GET_ROUTES  # peek
    assert "api/v1/search/" in GET_ROUTES
    assert "api/v1/schema/" in GET_ROUTES
    # the wait is a live endpoint, routed before Django: its route is the one the test requests
    assert [
        p.pattern.regex.match("api/v1/channels/qp/wait/") is not None
        for p in routing.http_urlpatterns
    ] == [True]


@pytest.mark.parametrize("route", [*GET_ROUTES, WAIT_ROUTE])
def test_every_get_route_refuses_an_unknown_parameter(alice, values, route):
    refused(alice.get(url(route, values) + "?bogus=1"), "bogus")


@pytest.mark.parametrize(
    ("route", "method"), [(route, method) for route, method, _ in ROUTES if method != "get"]
)
def test_every_other_operation_refuses_an_unknown_parameter_before_its_body(
    alice, values, route, method
):
    response = getattr(alice, method)(url(route, values) + "?zz=1&aa=2", {}, format="json")
    refused(response, "aa", "zz")


@pytest.mark.parametrize("route", sorted({route for route, _, _ in ROUTES}))
def test_options_refuses_an_unknown_parameter_too(alice, values, route):
    refused(alice.options(url(route, values) + "?bogus=1"), "bogus")
    assert alice.options(url(route, values)).status_code == 200


def test_a_misspelt_parameter_is_named_with_what_is_allowed(alice, values):
    r = alice.get("/api/v1/channels/qp/messages/?limt=5")
    refused(r, "limt")
    assert json.loads(r.content)["error"]["detail"]["allowed"] == ["after", "limit"]


@pytest.fixture
def document(api_client) -> dict[str, Any]:
    r = api_client.get("/api/v1/schema/?format=json")
    assert r.status_code == 200
    return json.loads(r.content)


def _schema_path(route: str) -> str:
    return "/" + re.sub(r"<str:(\w+)>", r"{\1}", route)


def test_what_each_view_takes_is_what_the_schema_declares(document):
    checked = 0
    for route, method, view in ROUTES:
        operation = document["paths"].get(_schema_path(route), {}).get(method)
        if operation is None:  # the schema and docs pages are no operation of the document,
            # nor the spellings without a trailing slash of the EP-0118 routes (unlisted)
            unslashed = not route.endswith("/") and _schema_path(route + "/") in document["paths"]
            assert unslashed or route in ("api/v1/schema/", "api/v1/docs/", "api/v1/redoc/"), route
            continue
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert getattr(view, method).query_parameters == declared, (route, method)
        assert "UNKNOWN_FIELD" in operation["x-error-codes"], (route, method)
        checked += 1
    assert checked >= 30
    wait = WAIT_PATH["/api/v1/channels/{name}/wait/"]["get"]
    assert {p["name"] for p in wait["parameters"] if p["in"] == "query"} == WAIT_PARAMETERS


@pytest.mark.parametrize("route", GET_ROUTES)
def test_every_declared_parameter_is_taken(alice, values, document, route):
    """Each parameter the schema declares reaches the view: whatever the value's verdict, it
    is never UNKNOWN_FIELD."""
    operation = document["paths"].get(_schema_path(route), {}).get("get")
    names = [] if operation is None else [p["name"] for p in operation.get("parameters", [])]
    for name in names:
        if name in values:  # a path parameter
            continue
        r = alice.get(url(route, values) + f"?{name}=1")
        if r.status_code >= 400:
            assert json.loads(r.content)["error"]["code"] != "UNKNOWN_FIELD", (route, name)
