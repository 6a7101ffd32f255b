"""The ``agentchat`` command-line client and the MCP server (DESIGN §2), filled by the client
issue; nothing here yet.

They speak to a server over HTTP with a token, with the reference CLI's verbs, flags, exit codes
and stable error codes. This package imports no Django (nor DRF, Channels, daphne…), directly
or through what it imports, so it runs from a plain virtualenv: an import-linter contract in
pyproject.toml checks it.
"""
