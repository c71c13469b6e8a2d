// The official MCP TypeScript SDK 2.x client (@modelcontextprotocol/client, pinned in package.json),
// pinned to protocol revision 2026-07-28, against the live server; driven by tests/e2e/test_ts_sdk_modern.py.
//
//   node modern_client.mjs <mcp_url> <bearer_token> <name-to-answer>
//
// Connects with versionNegotiation {pin: "2026-07-28"} (server/discover must offer it; no fallback),
// lists the tools, calls whoami, then ask_name: the server answers input_required with a form,
// the SDK fulfils it through our elicitation/create handler and retries with the requestState.
// Prints one JSON line on stdout: the era and version negotiated, the wire requests (method and
// MCP headers), the elicitations we were asked, and each call's outcome.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { readFileSync } from "node:fs";

const [mcpUrl, token, name] = process.argv.slice(2);
if (!mcpUrl || !token || !name) {
  console.error("usage: node modern_client.mjs <mcp_url> <token> <name-to-answer>");
  process.exit(2);
}

const report = {
  sdkVersion: JSON.parse(readFileSync(new URL("./node_modules/@modelcontextprotocol/client/package.json", import.meta.url), "utf8")).version,
  era: null,
  protocolVersion: null,
  wire: [], // {httpMethod, method, protocolVersionHeader, mcpMethod, mcpName, hasRequestState, sessionId}
  elicitations: [],
  tools: [],
  calls: {},
  errors: [],
};

// Record what goes on the wire through the transport's fetch.
const recordingFetch = async (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  let body = null;
  try {
    body = typeof init.body === "string" ? JSON.parse(init.body) : null;
  } catch {
    body = null;
  }
  report.wire.push({
    httpMethod: init.method ?? "GET",
    method: body?.method ?? null,
    protocolVersionHeader: headers.get("mcp-protocol-version"),
    mcpMethod: headers.get("mcp-method"),
    mcpName: headers.get("mcp-name"),
    hasRequestState: Boolean(body?.params?.requestState),
    sessionId: headers.get("mcp-session-id"),
  });
  return fetch(url, init);
};

const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  fetch: recordingFetch,
});

const client = new Client(
  { name: "ts-sdk-2-modern-e2e", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
client.setRequestHandler("elicitation/create", async (request) => {
  const params = request.params ?? {};
  report.elicitations.push({ mode: params.mode ?? null, message: params.message ?? null, requestedSchema: params.requestedSchema ?? null });
  return { action: "accept", content: { name } };
});

function outcome(result) {
  return { isError: Boolean(result.isError), text: result.content?.[0]?.text ?? null, structured: result.structuredContent ?? null };
}

try {
  await client.connect(transport);
  report.era = client.getProtocolEra?.() ?? null;
  report.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  report.tools = (await client.listTools()).tools.map((tool) => tool.name);
  for (const tool of ["whoami", "ask_name"]) {
    try {
      report.calls[tool] = { result: outcome(await client.callTool({ name: tool, arguments: {} })) };
    } catch (error) {
      report.calls[tool] = { error: { name: error?.name, code: error?.code ?? null, message: String(error?.message ?? error) } };
    }
  }
} catch (error) {
  report.errors.push(String(error?.stack ?? error));
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
