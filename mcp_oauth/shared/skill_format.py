"""The skill format on the wire (Skills extension ``io.modelcontextprotocol/skills``, SEP-2640, and
the Agent Skills specification it delegates the format to): ``SKILL.md`` front matter, names,
``skill://`` URIs, file paths inside a skill, ``sha256:`` digests and the per-skill limits.

Nothing here touches the disk or the database: the skill sources (:mod:`mcp_oauth.mcp_server.skills.sources`) read the bytes; the models (:mod:`mcp_oauth.models.skills`) store them.
"""

from __future__ import annotations

import hashlib
import math
import mimetypes
import re
from typing import Any

import yaml

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "EXTENSION",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "SCHEME",
    "SKILL_MD",
    "InvalidSkill",
    "check_file_path",
    "check_skill_path",
    "digest",
    "mime_type",
    "parse_front_matter",
    "skill_uri",
    "split_uri",
]

#: The extension identifier (SEP-2640 "Extension Identifier").
EXTENSION = "io.modelcontextprotocol/skills"
SCHEME = "skill"
SKILL_MD = "SKILL.md"
#: ``mimeType`` of a directory resource (SEP-2640 "Directory Resources").
DIRECTORY_MIME_TYPE = "inode/directory"
#: SEP-2640 "Limits": resources per skill (SKILL.md included) and their total size in bytes.
MAX_FILES = 512
MAX_TOTAL_BYTES = 16 * 1024 * 1024
#: Agent Skills: 1-64 lowercase letters, digits and hyphens, no leading, trailing or double hyphen.
NAME_RE = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
#: Agent Skills: the description is 1-1024 characters.
MAX_DESCRIPTION = 1024
#: RFC 3986 ``reg-name`` (the first skill-path segment is the URI authority) without percent-escapes.
_REG_NAME_RE = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=]+$")
#: One path segment of a file inside a skill: printable, no separator, no dot-segment.
_SEGMENT_RE = re.compile(r"^[^/\\\x00-\x1f\x7f]{1,255}$")
_FRONT_MATTER_RE = re.compile(rb"\A(?:\xef\xbb\xbf)?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
#: Longest front matter read (bytes): a SKILL.md is instructions, its header a few lines.
MAX_FRONT_MATTER = 64 * 1024


class InvalidSkill(ValueError):
    """A folder or admin skill that cannot be served; the message says why (shown by the system
    check ``mcp_oauth.W151`` and the admin form)."""


class _CoreSchemaLoader(yaml.SafeLoader):
    """YAML 1.2 core schema: ``yes``/``no``/``on``/``off`` and dates stay strings, as every YAML 1.2
    parser (and so every host comparing front matter field by field) reads them."""


_CoreSchemaLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
):
    _CoreSchemaLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node).replace("_", "")  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _json_value(value: Any, where: str) -> Any:
    """``value`` when JSON can carry it (strings keys, finite numbers). :raises InvalidSkill:"""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidSkill(f"front matter key {key!r} in {where} is not a string")
            out[key] = _json_value(item, f"{where}.{key}")
        return out
    if isinstance(value, list):
        return [_json_value(item, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidSkill(f"front matter value {where} is not a finite number")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise InvalidSkill(f"front matter value {where} is a {type(value).__name__}, not JSON")


def parse_front_matter(data: bytes) -> dict[str, Any]:
    """The YAML front matter of a ``SKILL.md`` as a JSON object, verbatim (every field the author
    wrote, YAML 1.2 core schema), with ``name`` and ``description`` checked (Agent Skills).

    :raises InvalidSkill: no leading ``---`` block, not UTF-8, not a YAML mapping, a value JSON cannot
        carry, a missing or invalid ``name`` / ``description``.
    """
    found = _FRONT_MATTER_RE.match(data[: MAX_FRONT_MATTER + 8])
    if found is None:
        raise InvalidSkill("SKILL.md does not begin with a --- delimited YAML front matter block")
    try:
        text = found.group(1).decode("utf-8")
        loaded = yaml.load(text, Loader=_CoreSchemaLoader)
    except UnicodeDecodeError:
        raise InvalidSkill("SKILL.md front matter is not UTF-8") from None
    except yaml.YAMLError as exc:
        raise InvalidSkill(f"SKILL.md front matter is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise InvalidSkill("SKILL.md front matter is not a YAML mapping")
    front = _json_value(loaded, "front matter")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidSkill(
            f"front matter name {name!r} is not a skill name (1-64 lowercase letters, digits and hyphens, "
            "no leading, trailing or double hyphen)"
        )
    if not isinstance(description, str) or not description.strip() or len(description) > MAX_DESCRIPTION:
        raise InvalidSkill(f"front matter description must be 1-{MAX_DESCRIPTION} characters")
    return front


def check_skill_path(path: str) -> str:
    """``path`` (``"git-workflow"``, ``"acme/billing/refunds"``) when it can locate a skill: ``/``
    separated segments, the first a ``reg-name`` (it is the URI authority), every segment a name-like
    path segment. :raises InvalidSkill:"""
    segments = path.split("/")
    if not path or any(not _REG_NAME_RE.match(segment) or segment in (".", "..") for segment in segments):
        raise InvalidSkill(f"skill path {path!r}: segments of letters, digits and -._~ only, separated by /")
    return path


def check_file_path(path: str) -> str:
    """``path`` when it names a file inside a skill: relative, ``/`` separated, no empty, ``.`` or
    ``..`` segment, no backslash or control character. :raises InvalidSkill:"""
    segments = path.split("/")
    if not path or any(s in ("", ".", "..") or not _SEGMENT_RE.match(s) for s in segments):
        raise InvalidSkill(f"file path {path!r} is not a relative path inside the skill")
    return path


def skill_uri(skill_path: str, file_path: str = SKILL_MD) -> str:
    """``skill://<skill-path>/<file-path>`` (SEP-2640 "Resource Mapping"); ``file_path=""``: the
    skill's root directory (no trailing slash)."""
    return f"{SCHEME}://{skill_path}/{file_path}" if file_path else f"{SCHEME}://{skill_path}"


def split_uri(uri: str) -> list[str] | None:
    """The path segments of a ``skill://`` URI (authority first), or None for another scheme, a
    query, a fragment, a percent-escape, an empty, ``.`` or ``..`` segment: such a URI names nothing
    (no normalisation, so ``skill://x/../../settings.py`` is simply unknown)."""
    prefix = f"{SCHEME}://"
    if not isinstance(uri, str) or not uri.startswith(prefix):
        return None
    rest = uri[len(prefix) :]
    if not rest or any(ch in rest for ch in "?#%\\"):
        return None
    segments = rest.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return None
    return segments


def digest(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of ``data`` (SEP-2640 "Integrity and Verification")."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def mime_type(file_path: str) -> str:
    """The ``mimeType`` of a skill file: ``text/markdown`` for Markdown, else guessed from the name
    (``application/octet-stream`` when unknown)."""
    if file_path.lower().endswith((".md", ".markdown")):
        return "text/markdown"
    return mimetypes.guess_type(file_path)[0] or "application/octet-stream"
