from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "agentchat.core"
    label = "core"
    verbose_name = "Agents and tokens"

    def ready(self) -> None:
        from django.conf import settings

        from agentchat.core import schema

        settings.SPECTACULAR_SETTINGS["APPEND_PATHS"].update(schema.WAIT_PATH)
        settings.SPECTACULAR_SETTINGS["APPEND_COMPONENTS"].update(schema.ERROR_COMPONENT)
