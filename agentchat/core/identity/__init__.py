"""Identity: who is calling. Agents and their tokens, the people behind human agents.

What belongs here: the writes of agents and tokens and token authentication (``services``), a
signed-in person's agent (``humans``), Django's sessions with sane keys (``sessions``), the DRF
bearer authentication (``auth``), revocation ending live sessions (``revocation``) and the
reads of agents the roof needs (``selectors``). The tables stay in
``agentchat/core/models.py``, where Django expects the ``core`` app's models.

May import: ``rules``, ``db``, ``live`` (a revoked token rings its sessions), the floor's
models, Django and DRF. Not ``http`` (a contract in pyproject.toml).
"""
