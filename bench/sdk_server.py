"""The official MCP Python SDK server (``mcp`` 2.3.0) for the side-by-side benchmark.

Serves the same ``echo`` tool as the reference project, with bearer auth against the *same*
PostgreSQL token table (DOT's ``oauth2_provider_accesstoken``: SHA-256 ``token_checksum``,
expiry, RFC 8707 ``resource``), through a psycopg async pool. Usage::

    .venv/bin/python bench/sdk_server.py --port 9001 --database-url postgres://… \
        --resource http://127.0.0.1:9000/mcp [--stateless] [--workers 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from datetime import UTC, datetime

ARGS: argparse.Namespace


def build_app():
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from psycopg_pool import AsyncConnectionPool

    database_url = os.environ["BENCH_DATABASE_URL"]
    resource = os.environ["BENCH_RESOURCE"]
    stateless = os.environ.get("BENCH_STATELESS") == "1"
    pool = AsyncConnectionPool(database_url, min_size=1, max_size=int(os.environ.get("BENCH_POOL", "4")), open=False)

    class TableVerifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            if pool.closed:
                await pool.open()
            checksum = hashlib.sha256(token.encode()).hexdigest()
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT t.scope, t.expires, t.resource, a.client_id FROM oauth2_provider_accesstoken t "
                    "JOIN oauth2_provider_application a ON a.id = t.application_id WHERE t.token_checksum = %s",
                    (checksum,),
                )
                row = await cursor.fetchone()
            if row is None:
                return None
            scope, expires, bound, client_id = row
            if expires <= datetime.now(UTC):
                return None
            bound = bound if isinstance(bound, list) else json.loads(bound or "[]")
            return AccessToken(
                token=token,
                client_id=client_id,
                scopes=scope.split(),
                expires_at=int(expires.timestamp()),
                resource=bound[0] if bound else None,
            )

    server = MCPServer(
        "sdk-bench",
        token_verifier=TableVerifier(),
        auth=AuthSettings(
            issuer_url=resource.rsplit("/", 1)[0],
            resource_server_url=resource,
            required_scopes=["mcp"],
            validate_token_resource=True,
        ),
        log_level="WARNING",
    )

    @server.tool()
    async def echo(text: str, times: int = 1) -> str:
        """Repeat ``text`` ``times`` times (1-10), separated by spaces."""
        return " ".join([text] * times)

    return server.streamable_http_app(
        stateless_http=stateless,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def trace_export() -> None:
    """With ``BENCH_SDK_OTLP_ENDPOINT`` set: an OpenTelemetry SDK tracer provider exporting over
    OTLP/HTTP in batches there, as the global provider, so that the SDK's own server spans (one per
    request, to the MCP semantic conventions: ``mcp.server._otel``) are recorded and exported, as
    an operator who turns the SDK's tracing on gets them. Without it the SDK's spans are the
    OpenTelemetry API's no-ops."""
    endpoint = os.environ.get("BENCH_SDK_OTLP_ENDPOINT")
    if not endpoint:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "mcp-sdk-bench"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    trace.set_tracer_provider(provider)


def app_factory():
    trace_export()
    return build_app()


def main() -> None:
    import sys
    from pathlib import Path

    import uvicorn

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--resource", required=True)
    parser.add_argument("--stateless", action="store_true")
    args = parser.parse_args()
    os.environ["BENCH_DATABASE_URL"] = args.database_url
    os.environ["BENCH_RESOURCE"] = args.resource
    os.environ["BENCH_STATELESS"] = "1" if args.stateless else "0"
    uvicorn.run(
        "bench.sdk_server:app_factory",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
