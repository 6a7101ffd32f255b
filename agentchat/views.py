"""The project's own pages outside the dashboard: the 404 page."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def not_found(request: HttpRequest) -> HttpResponse:
    return render(
        request, "404.html", {"version": settings.VERSION, "path": request.path}, status=404
    )
