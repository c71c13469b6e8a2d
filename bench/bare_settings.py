"""Settings of the bench's floor: the reference project serving one bare async JSON view."""

from project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.bare_urls"
