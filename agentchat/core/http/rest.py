"""REST plumbing shared by every app: the strict JSON parser, strict input serializers and the
one DRF exception handler.

Input is validated by ``StrictSerializer.validate_input(data)``: unknown fields, wrong JSON
types and oversized strings are refused with a stable code before anything is written. The
first failing field wins, so an error names one field and one code.
"""

from __future__ import annotations

import json
import keyword
import logging
import threading
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.validators import ProhibitNullCharactersValidator
from django.http import Http404
from rest_framework import exceptions, serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from agentchat.core.rules.errors import ERRORS, AppError, error_render
from agentchat.core.rules.validation import (
    field_size_check,
    invisible_problem,
    json_loads_strict,
    request_too_large,
    text_problem,
)

logger = logging.getLogger(__name__)


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.AGENTCHAT_MAX_REQUEST_BYTES
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and str(length).isascii() and str(length).isdigit() and int(length) > limit:
            raise request_too_large(limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if not raw.strip():
            return {}
        return json_loads_strict(raw)


# --- Strict fields --------------------------------------------------------------------------
# DRF fields coerce (an int becomes a string, "1" becomes True); these refuse the wrong JSON
# type instead. They raise ValidationError with our code, converted by StrictSerializer.


class Documented:
    """A field that carries the JSON schema of its rules for the OpenAPI document:
    ``openapi={...}`` (a pattern, bounds, the JSON type of a raw field) is merged into what the
    field maps to (agentchat.core.http.schema.DocumentedFieldExtension). Documentation only: the
    field and the service still judge the value, with their own codes."""

    def __init__(self, *args: Any, openapi: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.openapi = openapi or {}
        super().__init__(*args, **kwargs)


def _type_error(expected: str) -> serializers.ValidationError:
    return serializers.ValidationError(f"must be {expected}", code="INVALID_TYPE")


class StrictCharField(Documented, serializers.CharField):
    """A JSON string that is storable text (no lone surrogate, no NUL); with
    ``single_line=True`` also free of line separators and control characters."""

    def __init__(self, *, single_line: bool = False, **kwargs: Any) -> None:
        self.single_line = single_line
        super().__init__(**kwargs)
        # DRF's own NUL and surrogate validators loop over every character in Python (27 ms
        # for 500 KiB); ``text_problem`` below refuses the same with one regex search.
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(
                validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise _type_error("a string")
        problem = text_problem(data, single_line=self.single_line)
        if problem is not None:
            raise serializers.ValidationError(problem, code="INVALID_VALUE")
        if self.single_line and (problem := invisible_problem(data)) is not None:
            raise serializers.ValidationError(problem, code="INVISIBLE_CHARACTER")
        return super().to_internal_value(data)


class StrictIntegerField(Documented, serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise _type_error("an integer")
        return super().to_internal_value(data)


class StrictBooleanField(Documented, serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise _type_error("true or false")
        return data


class StrictListField(Documented, serializers.ListField):
    def to_internal_value(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            raise _type_error("a list")
        return super().to_internal_value(data)


class StrictDictField(Documented, serializers.DictField):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise _type_error("an object")
        return super().to_internal_value(data)


class RawJSONField(Documented, serializers.Field[Any, Any, Any, Any]):
    """Any JSON value (null included), passed through unchanged for the service to judge with
    its own codes (e.g. LEASE_INVALID_DURATION rather than a generic type error).
    ``nullable`` only documents whether the service takes null."""

    def __init__(self, *, nullable: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        self.nullable = nullable
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class AnyJSONField(Documented, serializers.JSONField):
    """Any JSON value within the field size; its contents are the service's to judge
    (``json_value_check``)."""

    def to_internal_value(self, data: Any) -> Any:
        field_size_check(self.field_name or "", json.dumps(data, ensure_ascii=False))
        return data


class KeywordFieldsMetaclass(serializers.SerializerMetaclass):
    """A field declared as a Python keyword and an underscore (``from_``) is the keyword's
    field (``from``): the wire name a class body cannot spell."""

    @classmethod
    def _get_declared_fields(
        cls, bases: Any, attrs: dict[str, Any]
    ) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super()._get_declared_fields(bases, attrs)
        return {_wire_name(name): field for name, field in fields.items()}


def _wire_name(name: str) -> str:
    spelled = name.removesuffix("_")
    return spelled if spelled != name and keyword.iskeyword(spelled) else name


# DRF's own validation codes, mapped onto ours.
_DRF_CODES = {
    "required": "MISSING_FIELD",
    "null": "INVALID_TYPE",
    "invalid": "INVALID_TYPE",
    "not_a_list": "INVALID_TYPE",
    "not_a_dict": "INVALID_TYPE",
    "blank": "INVALID_VALUE",
    "empty": "INVALID_VALUE",
    "max_length": "INVALID_VALUE",
    "min_length": "INVALID_VALUE",
    "max_value": "INVALID_VALUE",
    "min_value": "INVALID_VALUE",
    "invalid_choice": "INVALID_VALUE",
    "max_string_length": "INVALID_VALUE",
}


def _first_error(detail: Any, path: str = "") -> tuple[str, str, str]:
    """(field path, message, code) of the first error in a DRF error tree."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            sub = key if key != "non_field_errors" else ""
            return _first_error(value, f"{path}.{sub}".strip(".") if sub else path)
    if isinstance(detail, list) and detail:
        for index, value in enumerate(detail):
            if value:
                child = path if not isinstance(value, (dict, list)) else f"{path}[{index}]"
                return _first_error(value, child)
    message = str(detail)
    code = getattr(detail, "code", None) or "invalid"
    return path, message, code


def validation_error(
    exc: serializers.ValidationError, code_map: dict[str, str] | None = None
) -> AppError:
    """The first failure of a DRF validation as our error: its field, its message, and a
    declared code (a serializer's own map first, then DRF's codes mapped onto ours, then a code
    the field raised itself if it is declared; INVALID_VALUE otherwise)."""
    field, message, code = _first_error(exc.detail)
    ours = (code_map or {}).get(code) or _DRF_CODES.get(code)
    if ours is None:
        ours = code if code in ERRORS else "INVALID_VALUE"
    prefix = f"{field}: " if field else ""
    return AppError(ours, f"{prefix}{message}", detail={"field": field})


_validators = threading.local()


class StrictSerializer(serializers.Serializer[Any], metaclass=KeywordFieldsMetaclass):
    """Input serializer that refuses unknown fields and maps every failure to a stable code.

    Subclasses may override the codes (tasks use TASK_* codes, locks PATH_LOCK_* codes).
    """

    unknown_field_code: ClassVar[str] = "UNKNOWN_FIELD"
    code_map: ClassVar[dict[str, str]] = {}

    @classmethod
    def validate_input(cls, data: Any, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise AppError("INVALID_JSON", "request body must be a JSON object")
        unknown = sorted(set(data) - set(cls._declared_fields))
        if unknown:
            raise AppError(
                cls.unknown_field_code,
                f"unknown field(s): {', '.join(unknown)}",
                detail={"fields": unknown},
            )
        try:
            validated = cls._validator(**kwargs).run_validation(data)
        except serializers.ValidationError as exc:
            raise validation_error(exc, cls.code_map) from None
        return dict(validated)

    @classmethod
    def _validator(cls, **kwargs: Any) -> StrictSerializer:
        # Building a serializer deep-copies its declared fields (about 0.2 ms here), on every
        # request. Validation keeps no state on the serializer or its fields, so each thread
        # reuses one instance per class; ``run_validation`` is what ``is_valid`` calls.
        if kwargs:
            return cls(**kwargs)
        cache = _validators.__dict__.setdefault("by_class", {})
        validator: StrictSerializer | None = cache.get(cls)
        if validator is None:
            validator = cache[cls] = cls()
        return validator


# --- The one exception handler --------------------------------------------------------------


def app_error_response(exc: AppError) -> Response:
    """The one renderer (``error_render``) as a DRF response."""
    rendered = error_render(exc)
    return Response(rendered.body, status=rendered.status, headers=rendered.headers)


def as_app_error(exc: Exception) -> AppError | None:
    """Translate framework exceptions into AppError; None for unexpected ones (a 500)."""
    if isinstance(exc, AppError):
        return exc
    if isinstance(exc, exceptions.NotAuthenticated):
        return AppError(
            "AUTH_REQUIRED", "authentication required: send Authorization: Bearer <token>"
        )
    if isinstance(exc, exceptions.AuthenticationFailed):
        return AppError("AUTH_INVALID", str(exc.detail))
    if isinstance(exc, exceptions.ParseError):
        return AppError("INVALID_JSON", str(exc.detail))
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return AppError("UNSUPPORTED_MEDIA_TYPE", "send the request body as application/json")
    if isinstance(exc, exceptions.MethodNotAllowed):
        return AppError("METHOD_NOT_ALLOWED", str(exc.detail))
    if isinstance(exc, (exceptions.NotFound, Http404)):
        return AppError("NOT_FOUND", "not found")
    if isinstance(exc, exceptions.PermissionDenied):
        return AppError("FORBIDDEN", str(exc.detail))
    if isinstance(exc, exceptions.NotAcceptable):
        return AppError("NOT_ACCEPTABLE", str(exc.detail))
    if isinstance(exc, RequestDataTooBig):
        return request_too_large()
    if isinstance(exc, serializers.ValidationError):
        return validation_error(exc)
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    error = as_app_error(exc)
    if error is None:
        return None  # unexpected: Django logs it and answers 500
    return app_error_response(error)
