"""The pages of the project itself (the dashboard comes later)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"version": settings.VERSION})


def not_found(request: HttpRequest) -> HttpResponse:
    return render(
        request, "404.html", {"version": settings.VERSION, "path": request.path}, status=404
    )
