"""The one error table: every code raised is declared, rendered one way, with its exit family."""

from __future__ import annotations

import ast
import json

import pytest

from agentchat.core.rules.errors import (
    ERRORS,
    EXIT_CLAIM_LOST,
    EXIT_PLAIN,
    EXIT_USAGE,
    AppError,
    UndeclaredErrorCode,
    error_body,
    error_render,
)
from tests.commands import manage, manage_env, own_sqlite_file
from tests.conftest import ROOT

SOURCES = [
    path
    for package in ("agentchat", "channels_app", "tasks_app", "locks_app")
    for path in sorted((ROOT / package).rglob("*.py"))
    if "migrations" not in path.parts
]


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _codes_in_sources() -> tuple[dict[str, list[str]], list[str]]:
    """Literal codes raised or passed as a ``code``, and the places that build one."""
    found: dict[str, list[str]] = {}
    built: list[str] = []

    def literal(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.setdefault(node.value, []).append(where)
        elif isinstance(node, ast.JoinedStr | ast.BinOp):
            built.append(where)

    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                if _callee(node) == "AppError" and node.args:
                    literal(node.args[0], where)
                for keyword in node.keywords:
                    if keyword.arg in {"code", "depth_code", "number_code"}:
                        literal(keyword.value, where)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {getattr(target, "id", None) for target in targets}
                if names & {"code", "unknown_field_code"} and node.value is not None:
                    literal(node.value, where)
                if "code_map" in names and isinstance(node.value, ast.Dict):
                    for value in node.value.values:
                        literal(value, where)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
                    if arg.arg.endswith("code") and default is not None:
                        literal(default, where)
    return found, built


def test_every_code_in_the_sources_is_declared():
    found, _ = _codes_in_sources()
    undeclared = {code: places for code, places in found.items() if code not in ERRORS}
    assert undeclared == {}
    assert len(found) > 50  # the scan sees the raise sites (it would pass vacuously otherwise)


def test_no_code_is_built_at_run_time():
    _, built = _codes_in_sources()
    assert built == []


def test_raising_an_undeclared_code_is_a_bug():
    with pytest.raises(UndeclaredErrorCode):
        AppError("NO_SUCH_CODE", "x")


@pytest.mark.parametrize(
    ("code", "status", "exit_code"),
    [
        ("TASK_NOT_FOUND", 404, EXIT_USAGE),
        ("LEASE_CONFLICT", 409, EXIT_USAGE),
        ("PATH_LOCK_CONFLICT", 409, EXIT_PLAIN),
        ("MARKER_ALREADY_CLAIMED", 409, EXIT_CLAIM_LOST),
        ("CHANNEL_NOT_FOUND", 404, EXIT_PLAIN),
        ("AUTH_REQUIRED", 401, EXIT_PLAIN),
    ],
)
def test_codes_carry_status_and_the_references_exit_family(code, status, exit_code):
    error = AppError(code, "x")
    assert (error.status, error.exit_code) == (status, exit_code)


def test_every_family_follows_the_reference_cli():
    for code, spec in ERRORS.items():
        if code.startswith(("TASK_", "LEASE_", "EVENT_")):
            assert spec.exit == EXIT_USAGE, code
        if code.startswith(("PATH_LOCK_", "STATE_")):
            assert spec.exit == EXIT_PLAIN, code


def test_the_renderer_adds_the_bearer_challenge_to_401():
    rendered = error_render(AppError("AUTH_REQUIRED", "send a token"))
    assert rendered.status == 401
    assert rendered.headers == {"WWW-Authenticate": 'Bearer realm="agentchat"'}
    assert json.loads(rendered.content()) == {
        "error": {"code": "AUTH_REQUIRED", "message": "send a token", "detail": {}}
    }


def test_the_renderer_names_allowed_methods_of_a_405():
    rendered = error_render(AppError("METHOD_NOT_ALLOWED", "no", detail={"allow": ["GET"]}))
    assert rendered.headers == {"Allow": "GET"}


def test_an_error_quoting_hostile_input_can_always_be_encoded():
    error = AppError(
        "INVALID_NAME",
        "bad \udcff",
        detail={"value": "a\ud800b", "number": float("nan"), 3: (1, object)},
    )
    body = json.loads(error_render(error).content())
    assert body["error"]["message"] == "bad ?"
    assert body["error"]["detail"]["value"] == "a?b"
    assert body["error"]["detail"]["number"] == "nan"
    assert body["error"]["detail"]["3"][0] == 1
    assert error_body(error) == body


@own_sqlite_file
def test_a_management_command_exits_with_the_codes_family(tmp_path):
    env = manage_env(tmp_path)

    assert manage(env, "migrate", "--noinput").returncode == 0
    run = manage(env, "revoke_agent_tokens", "nobody")
    assert run.returncode == EXIT_PLAIN
    assert run.stderr.strip() == "CommandError: AGENT_NOT_FOUND: no agent named 'nobody'"


def test_every_surface_spells_an_error_body_alike(api_for):
    client = api_for("alice")
    client.raise_request_exception = False
    lane = client.get("/api/v1/no-such-route/")  # the lane's own 404
    drf = client.post("/api/v1/channels/", {"name": "x", "nope": 1}, format="json")  # a view's
    for response in (lane, drf):
        assert response.content.startswith(b'{"error":{"code":'), response.content
