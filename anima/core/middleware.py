"""Middleware: the operations endpoints (/healthz, /readyz, /metrics) and the console's replica reads."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import reverse
from prometheus_client import CONTENT_TYPE_LATEST

from anima.core.db import replica_reads
from anima.core.health import readiness_report
from anima.core.metrics import metrics_exposition

# A request that carries one of these came through a proxy, so its REMOTE_ADDR is the proxy's, not the scraper's.
_PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


class OpsEndpointsMiddleware:
    """Answers ``/healthz``, ``/readyz`` and ``/metrics`` before any other middleware runs.

    First in the chain on purpose: load balancers and Prometheus call by IP address (a Host header
    that is not in ALLOWED_HOSTS), over plain HTTP (no HTTPS redirect), without session or CSRF,
    and probes and scrapes should not count in the request metrics.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.endpoints = {"/healthz": self.healthz, "/readyz": self.readyz, "/metrics": self.metrics}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        endpoint = self.endpoints.get(request.path_info.rstrip("/"))
        if endpoint is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        return endpoint(request)

    def healthz(self, request: HttpRequest) -> HttpResponse:
        """The process answers: no database, no cache, no I/O."""
        return JsonResponse({"status": "ok"})

    def readyz(self, request: HttpRequest) -> HttpResponse:
        ready, checks = readiness_report()
        return JsonResponse({"status": "ok" if ready else "fail", "checks": checks}, status=200 if ready else 503)

    def metrics(self, request: HttpRequest) -> HttpResponse:
        if not metrics_client_allowed(request):
            return HttpResponse("metrics are internal (ANIMA_METRICS_ALLOWED)\n", status=403, content_type="text/plain")
        return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_LATEST)


def metrics_client_allowed(request: HttpRequest) -> bool:
    """A direct (unproxied) request from an address in ANIMA_METRICS_ALLOWED."""
    if any(header in request.META for header in _PROXY_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # gunicorn bound to [::] sees IPv4 clients as ::ffff:a.b.c.d
    return any(address in network for network in settings.ANIMA_METRICS_ALLOWED)


FRESH_COOKIE = "anima_fresh"
# How long after a console write the same browser reads from the primary: far beyond a healthy replica's lag.
FRESH_SECONDS = 10


class ConsoleReplicaMiddleware:
    """The console's pages (GET) read Anima's tables from the replica when one is configured.

    After a console write (a POST) the same browser reads from the primary for ``FRESH_SECONDS``,
    so the page a write redirects to shows the write whatever the replica's lag.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.prefix = ""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        self.prefix = self.prefix or reverse("admin:index")
        if not request.path_info.startswith(self.prefix):
            return self.get_response(request)
        if request.method in ("GET", "HEAD"):
            if FRESH_COOKIE in request.COOKIES:
                return self.get_response(request)
            with replica_reads():
                return self.get_response(request)
        response = self.get_response(request)
        response.set_cookie(FRESH_COOKIE, "1", max_age=FRESH_SECONDS, path=self.prefix, httponly=True, samesite="Lax")
        return response
