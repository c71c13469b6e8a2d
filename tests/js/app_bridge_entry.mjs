// The official MCP Apps host bridge (@modelcontextprotocol/ext-apps/app-bridge), bundled for the browser
// by tests/browser/test_mcp_apps.py (esbuild) and loaded by tests/support/mcp_apps_host/host_official.html.
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
