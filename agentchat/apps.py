from django.apps import AppConfig


class AgentChatConfig(AppConfig):
    """The roof (DESIGN §3) as an installed app, so that its management commands
    (``agentchat/management/commands/``: the folder's sync and import, later) load.

    The roof is everything in ``agentchat`` outside the floor ``agentchat.core``: what spans
    channels, tasks and locks. No app imports it; ``make lint`` checks that (import-linter,
    ``[tool.importlinter]`` in pyproject.toml).
    """

    name = "agentchat"
    label = "agentchat"
    verbose_name = "AgentChat"
