"""RFC 6570 URI templates, levels 1 and 2: expansion and matching (for ``resources/read``).

Supported expressions, one variable each (RFC 6570 §1.2 levels 1-2):

============  ==============================  ==========================
expression    expands ``x`` to                 matches
============  ==============================  ==========================
``{x}``       ``x`` with everything but        one or more characters other
              unreserved characters            than ``/ ? #`` (then
              percent-encoded (§3.2.2)         percent-decoded)
``{+x}``      ``x`` with reserved characters   one or more characters
              kept (§3.2.3)                    (then percent-decoded)
``{#x}``      ``#`` + the ``{+x}`` expansion   ``#`` and one or more characters
============  ==============================  ==========================

Level 3+ operators (``. / ; ? &``), several variables in one expression,
modifiers (``:3``, ``*``) and more than one ``{+x}`` / ``{#x}`` per template (their
matching would backtrack for seconds on a long URI) raise :class:`InvalidTemplate` at
registration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = ["InvalidTemplate", "UriTemplate"]

_EXPRESSION_RE = re.compile(r"\{([^{}]*)\}")
_VARNAME_RE = re.compile(r"^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$")
#: RFC 3986 §2.2 reserved characters, kept by ``{+x}`` and ``{#x}``.
_RESERVED = ":/?#[]@!$&'()*+,;="


class InvalidTemplate(ValueError):
    """The template is not an RFC 6570 level 1-2 template this module supports."""


@dataclass(frozen=True)
class _Part:
    literal: str | None = None
    operator: str = ""
    name: str = ""


class UriTemplate:
    """One parsed template. ``variables`` lists its variable names in order.

    :raises InvalidTemplate: unbalanced braces, an empty or level 3+ expression,
        a repeated variable, or two adjacent expressions (ambiguous to match).
    """

    def __init__(self, template: str) -> None:
        if not isinstance(template, str) or not template:
            raise InvalidTemplate("a URI template must be a non-empty string")
        self.template = template
        parts: list[_Part] = []
        position = 0
        for match in _EXPRESSION_RE.finditer(template):
            literal = template[position : match.start()]
            if "{" in literal or "}" in literal:
                raise InvalidTemplate(f"unbalanced braces in URI template {template!r}")
            if literal:
                parts.append(_Part(literal=literal))
            body = match.group(1)
            operator = body[:1] if body[:1] in "+#" else ""
            name = body[len(operator) :]
            if body[:1] in "./;?&=,!@|":
                raise InvalidTemplate(f"URI template {template!r}: operator {body[:1]!r} is RFC 6570 level 3+")
            if not _VARNAME_RE.match(name):
                raise InvalidTemplate(f"URI template {template!r}: invalid expression {{{body}}} (levels 1-2 only)")
            if parts and parts[-1].literal is None:
                raise InvalidTemplate(f"URI template {template!r}: adjacent expressions cannot be matched")
            parts.append(_Part(operator=operator, name=name))
            position = match.end()
        tail = template[position:]
        if "{" in tail or "}" in tail:
            raise InvalidTemplate(f"unbalanced braces in URI template {template!r}")
        if tail:
            parts.append(_Part(literal=tail))
        if sum(1 for part in parts if part.literal is None and part.operator) > 1:
            # Two lazy ".+?" groups make matching a 2 KB URI take seconds (catastrophic backtracking).
            raise InvalidTemplate(f"URI template {template!r}: at most one {{+var}} or {{#var}} expression")
        names = [part.name for part in parts if part.literal is None]
        if len(set(names)) != len(names):
            raise InvalidTemplate(f"URI template {template!r}: a variable appears twice")
        self.variables: tuple[str, ...] = tuple(names)
        self._parts = tuple(parts)
        pattern = []
        for index, part in enumerate(parts):
            if part.literal is not None:
                pattern.append(re.escape(part.literal))
            elif part.operator == "":
                pattern.append(f"(?P<v{index}>[^/?#]+)")
            elif part.operator == "+":
                pattern.append(f"(?P<v{index}>.+?)")
            else:
                pattern.append(f"#(?P<v{index}>.+?)")
        self._regex = re.compile("".join(pattern), re.DOTALL)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

    @property
    def is_literal(self) -> bool:
        """True when the template has no expression (a plain URI)."""
        return not self.variables

    def expand(self, values: dict[str, object]) -> str:
        """The URI for ``values`` (every variable required; values are ``str()``-ed).

        :raises KeyError: a variable has no value.
        """
        out = []
        for part in self._parts:
            if part.literal is not None:
                out.append(part.literal)
                continue
            value = str(values[part.name])
            safe = _RESERVED if part.operator else ""
            encoded = quote(value, safe=safe + "%" if part.operator else safe)
            out.append(("#" if part.operator == "#" else "") + encoded)
        return "".join(out)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` (percent-decoded strings), or None when it does not match."""
        found = self._regex.fullmatch(uri)
        if found is None:
            return None
        values = {}
        for index, part in enumerate(self._parts):
            if part.literal is None:
                try:
                    values[part.name] = unquote(found.group(f"v{index}"), errors="strict")
                except UnicodeDecodeError:
                    return None
        return values
