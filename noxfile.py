"""The supported Python × Django matrix and the tested release artifact (run by ``.ci/run``).

The primary pair (Python 3.11 + Django 5.2, the ``.venv`` that ``make test`` builds) runs the
whole suite; these sessions add, in venvs of their own installed from the package registries:

- ``matrix``: every other supported pair runs the migrations check (no migration churn), the
  system checks, ``tests/e2e/test_fresh_site.py`` (a new ``startproject`` site and the official
  client end to end), one real-browser OAuth flow, ``tests/mcp_oauth/mcp_server/transport/test_modern.py``
  and the settings, deploy check and migrations tests.
- ``release``: builds the sdist and the wheel (``python -m build``), checks their metadata
  (``twine check --strict``; the license expression, ``LICENSE`` in the dist-info, the project
  URLs) and the wheel's files, installs the wheel (not editable) with
  Django 6.1 into a fresh venv on Python 3.13, and runs ``tests/e2e/test_fresh_site.py`` from a copy
  of the tests outside the source tree with ``MCP_AUTHZ_TEST_INSTALLED=1`` (the site must import
  the installed package).

``nox`` runs both; ``nox -s matrix`` or ``nox -s "matrix(3.13-django6.1)"`` one of them. The
tests use ``DATABASE_URL`` as ``make test`` does (SQLite when unset). The interpreters come from
``PATH``, with pyenv's (``$PYENV_ROOT/versions/3.1x/bin``, ``/root/.pyenv`` by default) put first.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import nox
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent
PACKAGES = ("mcp_oauth", "elicitation")
PAIRS = [("3.12", "5.2"), ("3.12", "6.0"), ("3.13", "6.1")]
RELEASE = ("3.13", "6.1")
SUBSET = [
    "tests/e2e/test_fresh_site.py",
    "tests/mcp_oauth/mcp_server/transport/test_modern.py",
    "tests/mcp_oauth/test_settings.py",
    "tests/mcp_oauth/test_checks.py",
    "tests/test_migrations.py",
    "tests/browser/test_oauth.py::test_dcr_client_login_and_consent_in_chromium",
]
# What the release session copies to run the fresh-site test away from the source packages.
SUITE_FILES = ("tests", "project", "templates", "manage.py", "README.md", "docs", "pyproject.toml")

nox.options.sessions = ["matrix", "release"]
nox.options.default_venv_backend = "venv"


def _pyenv_first() -> None:
    versions = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
    found = [str(path) for path in sorted(versions.glob("3.1[123].*/bin")) if path.is_dir()]
    os.environ["PATH"] = os.pathsep.join([*found, os.environ.get("PATH", "")])


_pyenv_first()


def _django_spec(version: str) -> str:
    return f"Django~={version}.0"  # that feature release's newest patch release


@nox.session
@nox.parametrize("python,django", PAIRS, ids=[f"{python}-django{django}" for python, django in PAIRS])
def matrix(session: nox.Session, django: str) -> None:
    """One supported pair: migrations and system checks, the fresh site, a browser flow, 2026-07-28."""
    session.install("-e", ".[server,test]", _django_spec(django))
    session.run("python", "-c", _ASSERT_PAIR.format(python=session.python, django=django))
    checks_env = {"DATABASE_URL": f"sqlite:///{Path(session.create_tmp()).resolve() / 'checks.sqlite3'}"}
    session.run("python", "manage.py", "check", "--fail-level", "WARNING", env=checks_env)
    session.run("python", "manage.py", "makemigrations", "--check", "--dry-run", env=checks_env)
    session.run("pytest", "-p", "no:cacheprovider", "-q", *SUBSET, *session.posargs, env=_own_database(session))


def _own_database(session: nox.Session) -> dict[str, str]:
    """A PostgreSQL ``DATABASE_URL`` with the session's name appended to the database's, so that
    no session meets another's test database (one still being dropped, or left by a killed run)."""
    url = urlsplit(os.environ.get("DATABASE_URL", ""))
    if not url.scheme.startswith("postgres"):
        return {}
    suffix = re.sub(r"[^a-z0-9]+", "_", session.name.lower()).strip("_")
    return {"DATABASE_URL": urlunsplit(url._replace(path=f"{url.path.rstrip('/')}_{suffix}"))}


# The pair the venv really has: its Python (major.minor) and Django feature release.
_ASSERT_PAIR = (
    "import sys, django; assert '%d.%d' % sys.version_info[:2] == '{python}', sys.version;"
    " assert django.get_version().startswith('{django}.'), django.get_version()"
)


@nox.session(python=RELEASE[0])
def release(session: nox.Session) -> None:
    """Build, check and install the wheel (not editable), then run the fresh-site test against it."""
    session.install("build>=1.2", "twine>=5.1")
    tmp = Path(session.create_tmp()).resolve()
    dist = tmp / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT), silent=True)  # its log shown on failure
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    session.run("twine", "check", "--strict", str(sdist), str(wheel))
    _check_wheel(session, wheel)
    _check_sdist(session, sdist)

    venv = tmp / "site-venv"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    # First the wheel with what a site installs (no test tools, which bring packages of their own):
    # every module of both apps imports and the system checks pass.
    session.run(python, "-m", "pip", "install", "--quiet", f"{wheel}[server]", _django_spec(RELEASE[1]), external=True)
    with session.chdir(tmp):
        session.run(python, "-c", _ASSERT_PAIR.format(python=RELEASE[0], django=RELEASE[1]), external=True)
        session.run(python, "-c", _ASSERT_INSTALLED_FROM_WHEEL % wheel.name, external=True)
        session.run(python, "-c", _ASSERT_SITE_STARTS, external=True)
    session.run(
        python, "-m", "pip", "install", "--quiet", f"{wheel}[server,test]", _django_spec(RELEASE[1]), external=True
    )

    suite = tmp / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    suite.mkdir()
    for name in SUITE_FILES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("node_modules", "__pycache__", "artifacts", "*.sqlite3")
            shutil.copytree(source, suite / name, ignore=ignore)
        else:
            shutil.copy2(source, suite / name)
    with session.chdir(suite):
        session.run(
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/e2e/test_fresh_site.py",
            *session.posargs,
            env={"MCP_AUTHZ_TEST_INSTALLED": "1", "PYTHONPATH": "", **_own_database(session)},
            external=True,
        )


# The distribution as pip recorded it (PEP 610 direct_url.json): installed from the wheel file
# (an archive, not a source folder, not editable), its files in site-packages. Run outside the
# source tree, whose *.egg-info an editable install elsewhere may have left there.
_ASSERT_SITE_STARTS = """
import pkgutil, importlib
import django
from django.conf import settings
settings.configure(
    SECRET_KEY="x" * 50,
    INSTALLED_APPS=[
        "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
        "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
        "oauth2_provider", "mcp_oauth", "elicitation",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    MCP_OAUTH={"BASE_URL": "https://mcp.example.com"},
    ROOT_URLCONF="smoke_urls",
    STATIC_URL="/static/",
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                "OPTIONS": {"context_processors": ["django.contrib.auth.context_processors.auth",
                                                   "django.contrib.messages.context_processors.messages",
                                                   "django.template.context_processors.request"]}}],
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware"],
)
django.setup()
import sys, types
from django.urls import include, path
urls = sys.modules["smoke_urls"] = types.ModuleType("smoke_urls")
urls.urlpatterns = [path("", include("mcp_oauth.urls")), path("elicitation/", include("elicitation.urls"))]
for app in ("mcp_oauth", "elicitation"):
    package = importlib.import_module(app)
    for module in pkgutil.walk_packages(package.__path__, app + "."):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:  # only the backends of an extra not installed here
            extra = (exc.name or "").split(".")[0] in ("opentelemetry", "prometheus_client")
            if not (extra and module.name.startswith("mcp_oauth.observability.")):
                raise
from django.core.management import call_command
call_command("check")
"""

_ASSERT_INSTALLED_FROM_WHEEL = """
import json
from importlib.metadata import distribution
dist = distribution("django-mcp-authz")
origin = json.loads(dist.read_text("direct_url.json"))
assert origin["url"].endswith("/%s") and "archive_info" in origin, origin
files = {str(path) for path in dist.files}
assert {"mcp_oauth/py.typed", "elicitation/py.typed", "mcp_oauth/templates/mcp_oauth/login.html"} <= files
assert not any("__editable__" in path for path in files), sorted(files)
assert dist.locate_file("mcp_oauth/py.typed").is_file()
"""


def _tracked_package_files() -> set[str]:
    """Every file git tracks under the two packages (templates, migrations, py.typed, static)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *PACKAGES], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout
    return {name for name in listed.split("\0") if name}


def _check_wheel(session: nox.Session, wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
    missing = sorted(_tracked_package_files() - names)
    if missing:
        session.error(f"the wheel lacks {len(missing)} package files: {missing[:20]}")
    for required in ("mcp_oauth/py.typed", "elicitation/py.typed"):
        if required not in names:
            session.error(f"the wheel lacks {required}")
    for package in PACKAGES:
        if not any(name.startswith(f"{package}/migrations/0") for name in names):
            session.error(f"the wheel has no migrations for {package}")
        if not any(name.startswith(f"{package}/templates/") and name.endswith(".html") for name in names):
            session.error(f"the wheel has no templates for {package}")
    stray = sorted(
        name
        for name in names
        if name.split("/", 1)[0] not in PACKAGES and not name.split("/", 1)[0].endswith(".dist-info")
    )
    if stray:
        session.error(f"the wheel holds files outside the packages (project/, tests/, …): {stray[:20]}")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {str(Requirement(spec)) for spec in pyproject["dependencies"]}
    declared = {str(Requirement(spec)) for spec in metadata.get_all("Requires-Dist") or [] if "extra ==" not in spec}
    if declared != wanted:
        session.error(f"the wheel's Requires-Dist {sorted(declared)} differ from pyproject.toml's {sorted(wanted)}")
    if metadata["Requires-Python"] != pyproject["requires-python"]:
        session.error(f"the wheel's Requires-Python is {metadata['Requires-Python']!r}")
    if set(metadata.get_all("Classifier") or []) != set(pyproject["classifiers"]):
        session.error("the wheel's classifiers differ from pyproject.toml's")
    # PEP 639: the license expression, and the license text itself in the dist-info.
    if metadata["License-Expression"] != pyproject["license"] or metadata.get_all("License-File") != ["LICENSE"]:
        session.error(
            f"the wheel's License-Expression {metadata['License-Expression']!r} /"
            f" License-File {metadata.get_all('License-File')!r} differ from pyproject.toml's"
        )
    (license_name,) = [name for name in names if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", name)] or [None]
    if license_name is None:
        session.error("the wheel's dist-info has no licenses/LICENSE")
    with zipfile.ZipFile(wheel) as archive:
        if archive.read(license_name).decode() != (ROOT / "LICENSE").read_text():
            session.error(f"the wheel's {license_name} differs from LICENSE")
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    if urls != pyproject["urls"]:
        session.error(f"the wheel's Project-URLs {urls} differ from pyproject.toml's {pyproject['urls']}")
    static = sorted(name for name in names if "/static/" in name)
    session.log(
        f"{wheel.name}: {len(names)} files; every tracked package file present"
        f" ({len(static)} static files); Requires-Dist, classifiers, license (and {license_name}) and"
        " Project-URLs as in pyproject.toml"
    )


def _check_sdist(session: nox.Session, sdist: Path) -> None:
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/", 1)[0]
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    required = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE"} | _tracked_package_files()
    missing = sorted(required - names)
    if missing:
        session.error(f"the sdist lacks {missing[:20]}")
    session.log(
        f"{sdist.name} ({top}/): {len(names)} files; the packages, pyproject.toml, README.md and LICENSE present"
    )
