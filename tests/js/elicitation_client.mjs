// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk, pinned in package.json)
// against the live server; driven by tests/e2e/test_ts_sdk_elicitation.py.
//
//   node elicitation_client.mjs <mcp_url> <bearer_token> <elicitation-capability-json|none> [tools] [url-action]
//
// <elicitation-capability-json> is the value of capabilities.elicitation ("{}", '{"form":{}}',
// '{"form":{},"url":{}}'); "none" declares no elicitation capability at all.
// [tools]: comma-separated tool names to call (default ask_name,demo_profile,set_api_key).
// [url-action]: the answer to a URL-mode elicitation/create (default accept).
//
// Prints one JSON line on stdout: what was declared and sent on the wire, every message the
// server sent (requests, notifications), every elicitation/create, and the outcome of each call.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const [mcpUrl, token, capabilityArg, toolsArg, urlActionArg] = process.argv.slice(2);
if (!mcpUrl || !token || !capabilityArg) {
  console.error("usage: node elicitation_client.mjs <mcp_url> <token> <elicitation-json|none> [tools] [url-action]");
  process.exit(2);
}
const elicitationCapability = capabilityArg === "none" ? undefined : JSON.parse(capabilityArg);
const tools = (toolsArg || "ask_name,demo_profile,set_api_key").split(",").filter(Boolean);
const urlAction = urlActionArg || "accept";
const CALL_TIMEOUT_MS = 60_000;

const capabilities = elicitationCapability === undefined ? {} : { elicitation: elicitationCapability };
const report = {
  // The SDK's package.json is not in its "exports": read it from the node_modules next to this script.
  sdkVersion: JSON.parse(readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url), "utf8")).version,
  declared: capabilities,
  initializeSent: null, // params of the initialize request as it went on the wire
  negotiatedProtocolVersion: null,
  serverRequests: [], // every JSON-RPC request the server sent (method, id, params)
  elicitations: [], // every elicitation/create received: {mode, modeOnWire, message, url, elicitationId, requestedSchema}
  handled: [], // elicitation/create that reached our handler (after the SDK's own checks), and our answer
  answers: [], // our JSON-RPC responses to server requests, as sent
  notifications: [], // every notification the server sent (method, params)
  calls: {}, // tool name -> {result: {isError, text}} or {error: {code, message, data, name}}
  transportErrors: [],
};

const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
transport.onerror = (error) => report.transportErrors.push(String(error?.message ?? error));

// Observe the wire: Protocol.connect() chains onto an onmessage set before it, and send() is
// what every outgoing message goes through.
const pendingInitialize = new Set();
let currentCall = null; // the tool call in progress (null: connecting)
transport.onmessage = (message) => {
  if (message.id !== undefined && pendingInitialize.has(message.id) && message.result) {
    report.negotiatedProtocolVersion = message.result.protocolVersion;
    report.serverCapabilities = message.result.capabilities;
  }
  if (message.method !== undefined && message.id !== undefined) {
    report.serverRequests.push({ during: currentCall, method: message.method, id: message.id, params: message.params ?? null });
    if (message.method === "elicitation/create") {
      const params = message.params ?? {};
      report.elicitations.push({
        during: currentCall,
        modeOnWire: params.mode ?? null,
        mode: params.mode ?? "form",
        message: params.message ?? null,
        url: params.url ?? null,
        elicitationId: params.elicitationId ?? null,
        requestedSchema: params.requestedSchema ?? null,
      });
    }
  } else if (message.method !== undefined) {
    report.notifications.push({ during: currentCall, method: message.method, params: message.params ?? null });
  }
};
const send = transport.send.bind(transport);
transport.send = async (message, options) => {
  if (message.method === "initialize") {
    report.initializeSent = message.params;
    pendingInitialize.add(message.id);
  }
  if (message.method === undefined && message.id !== undefined && (message.result !== undefined || message.error !== undefined)) {
    report.answers.push({ id: message.id, result: message.result ?? null, error: message.error ?? null });
  }
  return send(message, options);
};

const client = new Client({ name: "django-mcp-authz ts-sdk test", version: "1.0.0" }, { capabilities });

if (elicitationCapability !== undefined) {
  // The SDK only lets a client that declared elicitation register this handler; its wrapper
  // refuses (InvalidParams) a mode the client did not declare before calling us.
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const params = request.params;
    const mode = params.mode ?? "form";
    const answer = mode === "url" ? { action: urlAction } : { action: "accept", content: { name: "Ada" } };
    report.handled.push({ mode, message: params.message, url: params.url ?? null, answer });
    return answer;
  });
}
// Anything else the server asks is recorded by the wire observer and refused by the SDK
// (no fallback handler: "Method not found").

try {
  await client.connect(transport);
  report.serverVersion = client.getServerVersion() ?? null;
  for (const name of tools) {
    currentCall = name;
    try {
      const result = await client.callTool({ name, arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
      report.calls[name] = {
        result: {
          isError: result.isError === true,
          text: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n"),
        },
      };
    } catch (error) {
      report.calls[name] = {
        error: {
          name: error?.constructor?.name ?? null,
          code: error instanceof McpError ? error.code : null,
          message: String(error?.message ?? error),
          data: error instanceof McpError ? error.data ?? null : null,
        },
      };
    }
  }
} catch (error) {
  report.fatal = String(error?.stack ?? error);
} finally {
  await client.close().catch(() => {});
}

process.stdout.write(JSON.stringify(report) + "\n");
process.exit(0);
