from django.contrib.admin.apps import AdminConfig


class HabitatAdminConfig(AdminConfig):
    """The admin app with the Habitat site as its default site, so every ``admin.register`` lands there."""

    default_site = "anima.console.site.HabitatSite"
