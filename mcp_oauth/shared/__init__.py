"""What every role of the app uses: resource and redirect URIs, origins and loopback rules,
scopes, throttling, overload answers, CORS, the UI security headers, SQL helpers, the Redis
client and the task queue. Imports nothing of the app but :mod:`mcp_oauth.settings` and
:mod:`mcp_oauth.errors`."""
