"""ASGI entry point of the second live instance in ``tests/e2e/test_url_elicitation.py`` (the "third-party provider").

``uvicorn tests.support.second_instance:application`` serves the unchanged reference project
(``project.asgi.application``) and, when ``E2E_REQUEST_LOG`` names a file, appends one JSON line
per request (``{"kind": "request", "n", "method", "path", "query", "authorization"}``) and one per
body chunk (``{"kind": "body", "n", "body"}``), written before the project sees them, so the test
can check exactly which credentials reached this instance.
"""

from __future__ import annotations

import itertools
import json
import os

from project.asgi import application as project_application

LOG_PATH = os.environ.get("E2E_REQUEST_LOG", "")
_numbers = itertools.count(1)


def _write(entry: dict) -> None:
    with open(LOG_PATH, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


async def application(scope, receive, send):
    if scope["type"] != "http" or not LOG_PATH:
        return await project_application(scope, receive, send)
    number = next(_numbers)
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    _write(
        {
            "kind": "request",
            "n": number,
            "method": scope.get("method"),
            "path": scope.get("path"),
            "query": scope.get("query_string", b"").decode("latin-1"),
            "authorization": headers.get("authorization", ""),
        }
    )

    async def recording_receive():
        message = await receive()
        if message.get("type") == "http.request" and message.get("body"):
            _write({"kind": "body", "n": number, "body": message["body"].decode("latin-1")})
        return message

    return await project_application(scope, recording_receive, send)
