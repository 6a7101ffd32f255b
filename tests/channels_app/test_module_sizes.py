"""channels_app's modules stay readable: none over 650 lines (the writes are a package split
by concern, the live endpoints one module each), and the endpoints are plain ASGI apps."""

from pathlib import Path

import channels_app
from channels_app import endpoints

LIMIT = 650


def test_no_module_of_channels_app_is_over_650_lines():
    root = Path(channels_app.__file__).parent
    sizes = {
        str(path.relative_to(root)): len(path.read_text().splitlines())
        for path in root.rglob("*.py")
        if "migrations" not in path.parts
    }
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}


def test_the_live_endpoints_are_plain_asgi_apps_named_for_what_they_are():
    for endpoint in (
        endpoints.WaitEndpoint,
        endpoints.MessageStreamEndpoint,
        endpoints.MultiplexEndpoint,
    ):
        assert endpoint.__name__.endswith("Endpoint")
        assert not any("Consumer" in base.__name__ for base in endpoint.__mro__)
