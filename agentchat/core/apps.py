from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "agentchat.core"
    label = "core"
    verbose_name = "Agents and tokens"
