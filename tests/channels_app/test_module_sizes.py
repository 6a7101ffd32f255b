"""The application's modules stay readable: none over 650 lines (channels_app's writes are a
package split by concern, the live endpoints one module each, the client's verbs by family),
and the endpoints are plain ASGI apps."""

from pathlib import Path

import agentchat
from channels_app import endpoints

LIMIT = 650
ROOT = Path(agentchat.__file__).parent.parent
PACKAGES = ("agentchat", "channels_app", "tasks_app", "locks_app")


def test_no_application_module_is_over_650_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    }
    assert len(sizes) > 100  # the walk found the packages
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}


def test_the_live_endpoints_are_plain_asgi_apps_named_for_what_they_are():
    for endpoint in (
        endpoints.WaitEndpoint,
        endpoints.MessageStreamEndpoint,
        endpoints.MultiplexEndpoint,
    ):
        assert endpoint.__name__.endswith("Endpoint")
        assert not any("Consumer" in base.__name__ for base in endpoint.__mro__)
