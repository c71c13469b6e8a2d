"""Text that every database can store.

PostgreSQL refuses NUL characters in text and jsonb, and no encoder accepts lone
surrogates; a parameter carrying either would turn into a database error (a 500).
The endpoints refuse such input up front with the error their spec names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from mcp_oauth.errors import OAuthError


def storable(value: Any) -> bool:
    """True when every string (and key) in ``value`` has no NUL and encodes as UTF-8."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return False
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def storable_text(value: str) -> str:
    """``value`` with each NUL and each lone surrogate replaced by U+FFFD: text every database and
    every encoder takes (``value`` itself, at no cost beyond one check, when it already is).

    For client text recorded after the fact, where a refusal is too late: the tool-call audit trail
    (one unstorable row makes PostgreSQL refuse its whole batch) and span names and attributes (one
    span the OTLP exporter cannot encode as UTF-8 loses its whole batch)."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


#: Characters that reorder or hide text (Unicode bidirectional embeddings, overrides and isolates,
#: zero-width and direction marks, the Arabic letter mark, the BOM): a client name holding one
#: can display as something else (``"Evil\u202eelgooG"`` shows as ``EvilGoogle``).
INVISIBLE_FORMAT_CHARACTERS = frozenset(
    [chr(c) for c in range(0x200B, 0x2010)]  # zero-width space / non-joiner / joiner, LRM, RLM
    + [chr(c) for c in range(0x202A, 0x202F)]  # LRE, RLE, PDF, LRO, RLO
    + [chr(c) for c in range(0x2066, 0x206A)]  # LRI, RLI, FSI, PDI
    + ["\u061c", "\u2060", "\ufeff"]  # Arabic letter mark, word joiner, BOM
)


def has_invisible_format_characters(value: str) -> bool:
    """Whether ``value`` holds a character of :data:`INVISIBLE_FORMAT_CHARACTERS`."""
    return any(ch in INVISIBLE_FORMAT_CHARACTERS for ch in value)


def without_invisible_format_characters(value: str) -> str:
    """``value`` with every :data:`INVISIBLE_FORMAT_CHARACTERS` character removed."""
    return "".join(ch for ch in value if ch not in INVISIBLE_FORMAT_CHARACTERS)


def request_params_storable(request: HttpRequest) -> bool:
    """Whether the query string and form parameters of ``request`` are :func:`storable`."""
    params = [request.GET.lists()]
    if request.method == "POST" and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        params.append(request.POST.lists())
    return all(storable(list(items)) for items in params)


def refuse_unstorable_params(view: Callable) -> Callable:
    """Answer 400 ``invalid_request`` (RFC 6749 §5.2) to parameters that are not storable text."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request_params_storable(request):
            return OAuthError(
                "invalid_request", "Parameters must be text without NUL characters or unpaired surrogates."
            ).response()
        return view(request, *args, **kwargs)

    return wrapper
