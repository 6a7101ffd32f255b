"""OpenAPI additions: the bearer scheme, and the wait long-poll (served by a consumer, so DRF
cannot see it)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agentchat.core.auth.BearerTokenAuthentication"
    name = "bearer"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent token from `manage.py create_agent_token NAME`.",
        }


_ERROR = {"$ref": "#/components/schemas/Error"}

WAIT_PATH = {
    "/api/v1/channels/{name}/wait/": {
        "get": {
            "operationId": "channels_wait",
            "summary": "Wait for a relevant message (long-poll)",
            "description": (
                "Returns as soon as a message relevant to the caller exists after its cursor "
                "(and advances the cursor like read), or after `timeout` seconds with "
                "`timed_out: true` and the cursor unchanged. Holds no server thread while parked."
            ),
            "tags": ["channels"],
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "timeout",
                    "in": "query",
                    "schema": {"type": "number", "minimum": 0, "default": 60},
                    "description": "seconds; at most AGENTCHAT_WAIT_MAX_TIMEOUT (900)",
                },
            ],
            "responses": {
                "200": {
                    "description": "messages, or a timeout",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "messages": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/MessageOutput"},
                                    },
                                    "cursor": {"type": "integer"},
                                    "timed_out": {"type": "boolean"},
                                },
                                "required": ["messages", "cursor"],
                            }
                        }
                    },
                },
                **{
                    status: {
                        "description": description,
                        "content": {"application/json": {"schema": _ERROR}},
                    }
                    for status, description in (
                        ("400", "INVALID_TIMEOUT, UNKNOWN_FIELD"),
                        ("401", "AUTH_REQUIRED, AUTH_INVALID"),
                        ("404", "CHANNEL_NOT_FOUND"),
                    )
                },
            },
        }
    }
}

ERROR_COMPONENT = {
    "schemas": {
        "Error": {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "example": "CHANNEL_NOT_FOUND"},
                        "message": {"type": "string"},
                        "detail": {"type": "object"},
                    },
                    "required": ["code", "message", "detail"],
                }
            },
            "required": ["error"],
        }
    }
}
