from django.apps import AppConfig


class LocksAppConfig(AppConfig):
    name = "locks_app"
    verbose_name = "Path locks"
