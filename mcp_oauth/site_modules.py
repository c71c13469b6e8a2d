"""The modules where a site registers its tools, resources and prompts, and the checks about them.

Every installed app's ``mcp_tools`` / ``mcp_resources`` / ``mcp_prompts`` module (the names
``TOOLS_MODULE``, ``RESOURCES_MODULE``, ``PROMPTS_MODULE``) is autodiscovered at start-up like
``admin.py``. A project package (``mysite``, the package of ``ROOT_URLCONF`` and of the settings
module) is usually not an installed app: its modules are imported only when named in
``TOOL_MODULES``, ``RESOURCE_MODULES`` or ``PROMPT_MODULES``. :func:`import_site_modules` imports
them all (from :func:`mcp_oauth.wiring.wire`); the checks report a named module that does not exist
(``mcp_oauth.W021``) and a project-package module that nothing will import (``mcp_oauth.W022``).
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps
from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.checks import CheckMessage, Warning, register
from django.utils.module_loading import autodiscover_modules

from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["KINDS", "check_module_settings", "check_project_package_modules", "import_site_modules"]

#: ``(what the modules hold, the autodiscovered module name's setting, the setting naming more modules)``.
KINDS = (
    ("tools", "TOOLS_MODULE", "TOOL_MODULES"),
    ("resources", "RESOURCES_MODULE", "RESOURCE_MODULES"),
    ("prompts", "PROMPTS_MODULE", "PROMPT_MODULES"),
)


def import_site_modules() -> None:
    """Autodiscover every installed app's modules, then import the ones the settings name.

    A named module that does not exist is skipped (``manage.py check`` reports it:
    ``mcp_oauth.W021``); an import error inside an existing module propagates.
    """
    for _kind, module_key, _list_key in KINDS:
        autodiscover_modules(getattr(mcp_oauth_settings, module_key))
    for _kind, _module_key, list_key in KINDS:
        for module in getattr(mcp_oauth_settings, list_key):
            try:
                import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise  # the module exists; something it imports does not


def _exists(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that does not import
        return False


@register()
def check_module_settings(app_configs, **kwargs):
    """W021 a module named in ``TOOL_MODULES``, ``RESOURCE_MODULES`` or ``PROMPT_MODULES`` does not exist."""
    messages: list[CheckMessage] = []
    for kind, _module_key, list_key in KINDS:
        for module in getattr(mcp_oauth_settings, list_key):
            if not _exists(module):
                messages.append(
                    Warning(
                        f'MCP_OAUTH["{list_key}"] names {module!r}, which does not exist: its {kind} are not served.',
                        hint="Create the module, or fix its dotted name.",
                        id="mcp_oauth.W021",
                    )
                )
    return messages


def project_packages() -> list[str]:
    """The site's project packages: the packages of ``ROOT_URLCONF`` and of the settings module."""
    found: list[str] = []
    # Under override_settings SETTINGS_MODULE reads None: the environment names the module then.
    settings_module = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(ENVIRONMENT_VARIABLE)
    for dotted in (getattr(settings, "ROOT_URLCONF", None), settings_module):
        if isinstance(dotted, str) and "." in dotted:
            package = dotted.rsplit(".", 1)[0]
            if package not in found:
                found.append(package)
    return found


@register()
def check_project_package_modules(app_configs, **kwargs):
    """W022 the project package holds an ``mcp_tools`` / ``mcp_resources`` / ``mcp_prompts`` module
    that is never imported: the package is not an installed app and no setting names the module."""
    installed = {config.name for config in apps.get_app_configs()}
    named = {module for _kind, _module_key, list_key in KINDS for module in getattr(mcp_oauth_settings, list_key)}
    messages: list[CheckMessage] = []
    for package in project_packages():
        if package in installed:
            continue  # autodiscovered
        for kind, module_key, list_key in KINDS:
            module = f"{package}.{getattr(mcp_oauth_settings, module_key)}"
            if module in named or module in sys.modules or not _exists(module):
                continue
            messages.append(
                Warning(
                    f"{module!r} is never imported: {package!r} is not an installed app and"
                    f' MCP_OAUTH["{list_key}"] does not name it, so its {kind} are not served.',
                    hint=f'Name it in the settings: MCP_OAUTH["{list_key}"] = ["{module}"].',
                    id="mcp_oauth.W022",
                )
            )
    return messages
