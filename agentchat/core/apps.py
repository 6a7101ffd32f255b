from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "agentchat.core"
    label = "core"
    verbose_name = "Agents and tokens"

    def ready(self) -> None:
        from django.conf import settings
        from django.contrib.auth.signals import user_logged_out

        from agentchat.core.db.rows import sqlite_query_conversion_cached
        from agentchat.core.http import schema
        from agentchat.core.identity.revocation import session_signed_out

        # Signing out ends the session's websockets, as revoking a token ends the token's.
        user_logged_out.connect(session_signed_out, dispatch_uid="agentchat.session_signed_out")

        sqlite_query_conversion_cached()
        settings.SPECTACULAR_SETTINGS["APPEND_PATHS"].update(schema.WAIT_PATH)
        settings.SPECTACULAR_SETTINGS["APPEND_COMPONENTS"].update(schema.ERROR_COMPONENT)
