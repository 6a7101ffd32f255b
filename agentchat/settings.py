"""Settings, read from the environment with working defaults.

With nothing set, the server runs on a SQLite file in the data folder (``var/``) and the
in-memory channel layer: one process, zero set-up. ``DATABASE_URL`` (``postgres://…``) and
``REDIS_URL`` switch to PostgreSQL and channels-redis for several processes.

Importing the settings creates no file or folder: ``agentchat.datadir.data_dir_prepare()`` does
that where a process starts (``manage.py``, ``agentchat.serve``, ``agentchat.asgi``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from agentchat import datadir
from agentchat.core.rules.presence import rate_parse

BASE_DIR = Path(__file__).resolve().parent.parent
# The deployment's data folder (AGENTCHAT_DATA_DIR): the default SQLite database, static files
# collected for the admin, the generated secret key.
DATA_DIR = datadir.data_dir()
VERSION = "0.1.0"


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# --- Security ------------------------------------------------------------------------------
DEBUG = env_bool("DEBUG")
# SECRET_KEY, else the key generated once in the data folder by the process start-up (every
# process of the deployment signs sessions alike, and they survive restarts). Only a process
# that starts Django without that start-up (the test suite, a script) and finds no key file
# gets a random key of its own.
SECRET_KEY = (
    os.environ.get("SECRET_KEY") or datadir.secret_key_read(DATA_DIR) or get_random_secret_key()
)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# --- Applications --------------------------------------------------------------------------
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "agentchat.core",
    "channels_app",
    "tasks_app",
    "locks_app",
    "agentchat",  # the roof: what spans the apps (its management commands load from here)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "agentchat.dashboard.csp.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "agentchat.urls"
# The dashboard's sign-in; after it, and after signing out, the channel list (or the form).
LOGIN_URL = "dashboard:signin"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "dashboard:signin"
ASGI_APPLICATION = "agentchat.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "agentchat.dashboard.context.navigation",
            ],
            "libraries": {"dashboard": "agentchat.dashboard.filters"},
        },
    },
]

# --- Database ------------------------------------------------------------------------------
# SQLite: writers queue (IMMEDIATE transactions + a long busy timeout, plus the in-process FIFO
# writer in agentchat.core.db.transactions) instead of failing with "database is locked".
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
        "PRAGMA busy_timeout=30000"
    ),
}
DEFAULT_SQLITE_PATH = DATA_DIR / "agentchat.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{DEFAULT_SQLITE_PATH}",
        conn_max_age=0,  # persistent connections leak under ASGI; PostgreSQL uses a pool
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("DB_POOL_MAX", "10")),
        # How long a request waits for a connection: with PostgreSQL down the pool has none to
        # give, and the request answers 503 DATABASE_UNAVAILABLE after this (never hangs).
        "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "5")),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channel layer -------------------------------------------------------------------------
# The layer is a doorbell: every live endpoint re-reads the database by seq after a ring.
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    from redis.connection import parse_url

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [REDIS_URL],
                # Redis pub/sub ignores database numbers: without the number in the channel
                # names, deployments (or test runs) on db 1 and db 2 of one Redis rang each
                # other's groups.
                "prefix": f"agentchat.db{parse_url(REDIS_URL).get('db') or 0}.",
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}
    }

# Sessions in the database, with keys checked for the shape Django makes (a hostile cookie
# never reaches a query).
SESSION_ENGINE = "agentchat.core.identity.sessions"

# --- Auth, i18n, static --------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = datadir.static_root(DATA_DIR)  # made at start-up: whitenoise warns when missing
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True  # serve app static files without collectstatic in a local run
# /favicon.ico (and nothing else yet) served from static/root/ at the site's root.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

# --- Limits (HTTP v1 document) -------------------------------------------------------------
AGENTCHAT_MAX_REQUEST_BYTES = 768 * 1024
AGENTCHAT_MAX_FIELD_BYTES = 512 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = AGENTCHAT_MAX_REQUEST_BYTES
# Upper bound for GET …/wait/?timeout=; the reference CLI defaults to 900 s.
AGENTCHAT_WAIT_MAX_TIMEOUT = float(os.environ.get("AGENTCHAT_WAIT_MAX_TIMEOUT", "900"))
# A wait without ?timeout= waits this long, never longer than the maximum allows.
AGENTCHAT_WAIT_DEFAULT_TIMEOUT = min(60.0, AGENTCHAT_WAIT_MAX_TIMEOUT)
# How often a websocket stream or a parked wait checks the database for a message whose ring
# was lost.
AGENTCHAT_STREAM_SWEEP_SECONDS = float(os.environ.get("AGENTCHAT_STREAM_SWEEP_SECONDS", "30"))
if not AGENTCHAT_STREAM_SWEEP_SECONDS > 0:  # 0 would turn every parked session into a loop
    raise ImproperlyConfigured("AGENTCHAT_STREAM_SWEEP_SECONDS must be a number of seconds > 0")
# A read or wait answers at most this many bytes of messages (and at least one message); the
# rest follows with `more: true`. S2, behind the HTTP v1 document, caps a batch at 1 MiB. A page
# of a list (channels, tasks, locks: agentchat.core.http.pages) holds about as many bytes of JSON.
AGENTCHAT_READ_MAX_BYTES = int(os.environ.get("AGENTCHAT_READ_MAX_BYTES", str(1024 * 1024)))
# The API's state summary (state/, state/snapshot/, compact/) answers at most this many bytes:
# past it the long message texts in it are shortened, each with a marker (docs/state.md). The
# synced folder's state.md is never shortened.
AGENTCHAT_STATE_MAX_BYTES = int(os.environ.get("AGENTCHAT_STATE_MAX_BYTES", str(1024 * 1024)))
# A dashboard page renders at most this many bytes of markdown (message bodies, the state
# summary): long bodies are excerpts linking to the whole message, and a page past it says so.
AGENTCHAT_PAGE_MAX_BYTES = int(os.environ.get("AGENTCHAT_PAGE_MAX_BYTES", str(512 * 1024)))
# How many of the dashboard's heavy pages (all people together) run at once on the heavy pool.
AGENTCHAT_PAGE_CONCURRENCY = int(os.environ.get("AGENTCHAT_PAGE_CONCURRENCY", "1"))
if not (AGENTCHAT_STATE_MAX_BYTES > 0 and AGENTCHAT_PAGE_MAX_BYTES > 0):
    raise ImproperlyConfigured("AGENTCHAT_STATE_MAX_BYTES and AGENTCHAT_PAGE_MAX_BYTES must be > 0")
if not AGENTCHAT_PAGE_CONCURRENCY > 0:
    raise ImproperlyConfigured("AGENTCHAT_PAGE_CONCURRENCY must be an integer > 0")
# A websocket subscriber whose connection stays full (it stopped reading) this long is closed
# with 4408 (a policy close); it reconnects with ?since= and loses nothing.
AGENTCHAT_STREAM_STALL_SECONDS = float(os.environ.get("AGENTCHAT_STREAM_STALL_SECONDS", "20"))
# The channels one multiplexed websocket (/ws/channels/) may follow at once: each holds a
# subscription to the channel's group and at most one batch of messages.
AGENTCHAT_STREAM_MAX_CHANNELS = int(os.environ.get("AGENTCHAT_STREAM_MAX_CHANNELS", "64"))
if not AGENTCHAT_STREAM_MAX_CHANNELS > 0:
    raise ImproperlyConfigured("AGENTCHAT_STREAM_MAX_CHANNELS must be an integer > 0")
# An HTTP v1 live follow (Server-Sent Events) writes a `: heartbeat` comment after this long
# without a write, so that proxies keep an idle stream open (the document asks for at most 15 s).
AGENTCHAT_SSE_HEARTBEAT_SECONDS = float(os.environ.get("AGENTCHAT_SSE_HEARTBEAT_SECONDS", "15"))
if not AGENTCHAT_SSE_HEARTBEAT_SECONDS > 0:
    raise ImproperlyConfigured("AGENTCHAT_SSE_HEARTBEAT_SECONDS must be a number of seconds > 0")
# How many live follows (Server-Sent Events) of the inbox one agent may hold open at once,
# whichever of its tokens they come with; and the admin monitor's follows, all told. One more is
# answered 429 SSE_TOO_MANY_FOLLOWS before its stream starts. The websockets (/ws/channels/…)
# one agent (or signed-in person) may hold open at once: one more gets an error frame
# (STREAM_TOO_MANY_CONNECTIONS) and the close 4429. With REDIS_URL the counts hold across the
# server's processes (agentchat.core.live.follows): each open one holds a place in Redis that
# its process renews; a place whose process died is free again after AGENTCHAT_FOLLOW_SLOT_SECONDS.
AGENTCHAT_SSE_MAX_PER_AGENT = int(os.environ.get("AGENTCHAT_SSE_MAX_PER_AGENT", "8"))
AGENTCHAT_SSE_MAX_MONITOR = int(os.environ.get("AGENTCHAT_SSE_MAX_MONITOR", "2"))
AGENTCHAT_WS_MAX_PER_AGENT = int(os.environ.get("AGENTCHAT_WS_MAX_PER_AGENT", "16"))
AGENTCHAT_FOLLOW_SLOT_SECONDS = float(os.environ.get("AGENTCHAT_FOLLOW_SLOT_SECONDS", "30"))
if not (
    AGENTCHAT_SSE_MAX_PER_AGENT > 0
    and AGENTCHAT_SSE_MAX_MONITOR > 0
    and AGENTCHAT_WS_MAX_PER_AGENT > 0
):
    raise ImproperlyConfigured(
        "AGENTCHAT_SSE_MAX_PER_AGENT, _SSE_MAX_MONITOR and _WS_MAX_PER_AGENT must be integers > 0"
    )
if not AGENTCHAT_FOLLOW_SLOT_SECONDS >= 1:
    raise ImproperlyConfigured("AGENTCHAT_FOLLOW_SLOT_SECONDS must be a number of seconds >= 1")
# How often each process looks up the tokens of its open waits and websockets, so that a
# revocation made elsewhere (a command, another process without Redis) ends them in seconds.
AGENTCHAT_REVOCATION_CHECK_SECONDS = float(
    os.environ.get("AGENTCHAT_REVOCATION_CHECK_SECONDS", "2")
)
# Threads that run database work for the API lane and the live endpoints (each keeps its SQLite
# connection; with PostgreSQL keep it below DB_POOL_MAX). Measured with 8 clients posting on
# 2 cores: on SQLite, whose writes are serialized anyway, a second thread only contends for the
# GIL inside the write transaction (which then lasts 1.7 ms instead of 0.8 ms): 470 against
# 353 posts/s. PostgreSQL waits on the network, and two threads do best (215 against 180 with
# one, 200 with four).
_DEFAULT_DB_THREADS = "1" if DATABASES["default"]["ENGINE"].endswith("sqlite3") else "2"
AGENTCHAT_DB_THREADS = int(os.environ.get("AGENTCHAT_DB_THREADS", _DEFAULT_DB_THREADS))
# Heavy requests (agentchat.core.db.heavy: state, compaction, search, lists, event reads) run on
# threads of their own, one at a time per agent (more wait, past the queue 429
# HEAVY_REQUEST_BUSY), within a budget of database work (past it 503 WORK_BUDGET_EXCEEDED), so
# that one agent's summaries cannot hold the threads every other agent's posts and peeks need.
# Long ones hold all of these threads but one, kept for peeks (bounded by limit and bytes).
AGENTCHAT_DB_HEAVY_THREADS = int(os.environ.get("AGENTCHAT_DB_HEAVY_THREADS", "2"))
AGENTCHAT_HEAVY_QUEUE_PER_AGENT = int(os.environ.get("AGENTCHAT_HEAVY_QUEUE_PER_AGENT", "4"))
AGENTCHAT_HEAVY_BUDGET_SECONDS = float(os.environ.get("AGENTCHAT_HEAVY_BUDGET_SECONDS", "2"))
# The interpreter's thread switch interval (seconds) once heavy requests run: how long a short
# request's thread may wait for the GIL that a heavy one holds (Python's default: 0.005).
AGENTCHAT_GIL_SWITCH = float(os.environ.get("AGENTCHAT_GIL_SWITCH", "0.0005"))
# The longest lease of a task or lock, seconds (a longer one is refused with the family's
# *_INVALID_DURATION): a lock of the whole workspace for years would be a denial of service.
AGENTCHAT_MAX_LEASE_SECONDS = float(os.environ.get("AGENTCHAT_MAX_LEASE_SECONDS", "86400"))
# Path locks: match paths case-insensitively, as on Windows.
AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE = env_bool("AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE")
# Path locks: how many held entries of a channel's unexpired locks may start with a wildcard
# (`*.md`, `**/x`, or `.`). Each is compared with every later request's paths, so their number
# bounds that work (a lock past it: PATH_LOCK_TOO_MANY_PATTERNS).
AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS = int(
    os.environ.get("AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS", "32")
)
# ... and how many of them one agent may hold in a channel, its expired locks included, so that
# one agent cannot take the whole channel's allowance (the channel's cap counts unexpired locks).
AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT = int(
    os.environ.get("AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT", "8")
)
# Path locks: how many entries (paths) one agent may hold in a channel, its expired locks
# included (it may unlock them at any time), and how many the channel's unexpired locks may
# hold: every held entry may be a candidate of a later request, so their number bounds that
# work (a lock past either: PATH_LOCK_TOO_MANY_PATHS).
AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT = int(
    os.environ.get("AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT", "256")
)
AGENTCHAT_PATH_LOCK_MAX_PATHS = int(os.environ.get("AGENTCHAT_PATH_LOCK_MAX_PATHS", "4096"))

# --- The agent registry and the post budget (EP-0118; agentchat.core.identity) -------------
# A registered agent not heard from for this long shows as `stale`: its slot may be taken by a
# new registration, and the idle handshake no longer counts it as active (the EP's 300).
AGENTCHAT_STALE_SECONDS = float(os.environ.get("AGENTCHAT_STALE_SECONDS", "300"))
# Every authenticated request is a heartbeat, written at most once per this many seconds per
# agent (reads write nothing in between). Well below the stale threshold.
AGENTCHAT_HEARTBEAT_SECONDS = float(os.environ.get("AGENTCHAT_HEARTBEAT_SECONDS", "5"))
if not 0 < AGENTCHAT_HEARTBEAT_SECONDS < AGENTCHAT_STALE_SECONDS:
    raise ImproperlyConfigured(
        "AGENTCHAT_HEARTBEAT_SECONDS must be > 0 and below AGENTCHAT_STALE_SECONDS"
    )
# The posts (messages, events, audited changes) one top-level agent and its sub-agents may make:
# `N/period` (10/min is the EP's), a token bucket of N refilling over the period; empty: no
# limit. The default stops a runaway loop, not a busy agent.
AGENTCHAT_POST_RATE = os.environ.get("AGENTCHAT_POST_RATE", "1200/min")
try:
    rate_parse(AGENTCHAT_POST_RATE)
except ValueError as exc:
    raise ImproperlyConfigured(f"AGENTCHAT_POST_RATE: {exc}") from None

# --- The loop guard (channels_app.services.loopguard) ---------------------------------------
# Agents answering each other automatically (the echo storm): this many consecutive messages of
# one channel exchanged among agents only (at least two of them; no human post, no task or lock
# change in between), each within AGENTCHAT_LOOP_GUARD_SECONDS of the one before, post one
# `loop.suspected` audit message and flag the channel on the dashboard. 0: no loop guard.
AGENTCHAT_LOOP_GUARD_MESSAGES = int(os.environ.get("AGENTCHAT_LOOP_GUARD_MESSAGES", "50"))
AGENTCHAT_LOOP_GUARD_SECONDS = float(os.environ.get("AGENTCHAT_LOOP_GUARD_SECONDS", "30"))
# How long a flag holds (a human post ends it sooner); then a new run starts counting.
AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS = float(
    os.environ.get("AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS", "600")
)
# Whether a flagged channel refuses agents' posts (429 LOOP_SUSPECTED, Retry-After the rest of
# the cool-down) until a human posts or the cool-down passes. Off: the flag only tells.
AGENTCHAT_LOOP_GUARD_REFUSE = os.environ.get("AGENTCHAT_LOOP_GUARD_REFUSE", "").strip().lower() in (
    "1",
    "true",
    "yes",
    "on",
)
if AGENTCHAT_LOOP_GUARD_MESSAGES != 0 and AGENTCHAT_LOOP_GUARD_MESSAGES < 2:
    raise ImproperlyConfigured("AGENTCHAT_LOOP_GUARD_MESSAGES must be 0 (off) or at least 2")
if AGENTCHAT_LOOP_GUARD_SECONDS <= 0 or AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS <= 0:
    raise ImproperlyConfigured(
        "AGENTCHAT_LOOP_GUARD_SECONDS and AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS must be > 0"
    )

# --- HTTP v1 (/v1/: direct messages, inboxes, the admin monitor) ----------------------------
# The admin monitor's bearer token (the HTTP v1 document's name, AGENT_CHAT_ADMIN_TOKEN): unset
# or empty, GET /v1/monitor answers 404 MONITOR_DISABLED. Set, the monitor takes it and nothing
# else, and every other endpoint refuses it (403 ADMIN_TOKEN_NOT_ALLOWED). It is compared in
# constant time and never logged; at least 16 characters, so that a placeholder is no token.
AGENTCHAT_ADMIN_TOKEN = os.environ.get("AGENT_CHAT_ADMIN_TOKEN", "").strip()
if AGENTCHAT_ADMIN_TOKEN and len(AGENTCHAT_ADMIN_TOKEN) < 16:
    raise ImproperlyConfigured("AGENT_CHAT_ADMIN_TOKEN must be at least 16 characters")

# --- REST framework ------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agentchat.core.identity.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["agentchat.core.http.rest.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "agentchat.core.http.rest.exception_handler",
    "DEFAULT_METADATA_CLASS": "agentchat.core.http.query.QueryCheckedMetadata",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "AgentChat server API",
    "DESCRIPTION": (
        "Peer AI agent coordination: channels of markdown messages, read cursors, wait, "
        "marker claims, tasks under leases and workspace path locks. Every call needs "
        '`Authorization: Bearer <token>`; errors are `{"error": {"code", "message", '
        '"detail"}}` with a stable code.'
    ),
    "VERSION": VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # What operations' tags start after: /api/v1/ and HTTP v1's /v1/ (a tag per first segment).
    "SCHEMA_PATH_PREFIX": r"/(?:api/)?v1/",
    "APPEND_PATHS": {},  # filled in by agentchat.core.apps (the wait endpoint)
    "APPEND_COMPONENTS": {},
    # The one choice set of clear_owner / clear_branch in a task update (only true clears), and
    # one name for the agent kinds (a message's sender_kind, GET /me/'s kind); HTTP v1's receipt
    # statuses and envelope kinds (channels_app.envelopes).
    "ENUM_NAME_OVERRIDES": {
        "ClearFlagEnum": [(True, True)],
        "AgentKindEnum": ["agent", "human"],
        "ReceiptStatusEnum": ["delivered", "processed", "read", "rejected"],
        "StatusEnum": "tasks_app.selectors.STATUSES",  # the tasks' keep the plain name
        "EnvelopeKindEnum": ["message", "contact.share", "receipt"],
        "SignalTypeEnum": "channels_app.services.SIGNAL_TYPES",
        "ContactEventTypeEnum": ["contact.upsert"],
    },
    # Every operation's error responses from the one error table (agentchat.core.http.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agentchat.core.http.schema.error_responses_hook",
    ],
    # The schema and the docs pages are public: they describe the API, no data. A token sent
    # with them is not even looked at (a revoked one does not turn the docs into a 401).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "null": {"class": "logging.NullHandler"},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {
        # A request for a foreign Host is answered 400; Django would also log it as an error
        # with a traceback, so that any client could fill the log with them.
        "django.security.DisallowedHost": {"handlers": ["null"], "propagate": False},
    },
}
