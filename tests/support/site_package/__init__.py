"""A project package that is not an installed app (like ``startproject``'s ``mysite``), with an
``mcp_tools.py``, an ``mcp_resources.py`` and an ``mcp_prompts.py`` (tests/mcp_oauth/test_site_modules.py)."""
