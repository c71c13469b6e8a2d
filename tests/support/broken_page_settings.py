"""The reference site's settings with a URLconf whose login page fails (a template that extends
one the site does not have): a real 500 for tests/topology/test_error_logging.py."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "tests.support.urls_broken_login"
