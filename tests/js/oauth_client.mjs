// The official MCP TypeScript SDK 2.x client (@modelcontextprotocol/client, pinned in package.json)
// doing the OAuth itself against the live server; driven by tests/e2e/test_ts_sdk_oauth.py.
//
//   node oauth_client.mjs '<json config>'
//
// config: {mcpUrl, era: "legacy" | "auto" | "2026-07-28", flow, dpop?, calls?, againAfterMs?, ...flow options}
//   flow "authorization_code": the SDK's OAuthClientProvider flow (401 -> RFC 9728 -> RFC 8414 ->
//     dynamic registration -> authorize with PKCE). The authorization URL is printed as
//     {"event":"authorize","url":...}; the driver logs in and consents with a real HTTP session and
//     answers on stdin with one line {"callback": "<redirect URL with code, state, iss>"}, which
//     goes to the transport's finishAuth. Options: redirectUrl, clientName, clientMetadataUrl (an
//     HTTPS client ID metadata document: the SDK then uses it as client_id instead of registering),
//     dpop (the provider's dpop() returns one DpopSession).
//   dpop (any flow): the provider's dpop() returns one DpopSession (set on the machine providers,
//     which leave it undefined).
//   againAfterMs (any flow): after the calls, wait that long and open a second session with the same
//     provider (an expired access token is refreshed on its 401, a stale DPoP nonce re-challenged).
//   callIntervalMs (any flow): wait that long between two calls of one session (an expired access
//     token is refreshed on its 401; a refused refresh sends the user to authorize again, and the
//     session is opened anew once the driver answers).
//   durationMs (any flow, with callIntervalMs): call until that long has passed instead of `calls` times.
//   flow "client_credentials": ClientCredentialsProvider {clientId, clientSecret, issuer, scope}.
//   flow "private_key_jwt": PrivateKeyJwtProvider {clientId, privateKeyPem, alg, issuer, scope}.
//   flow "cross_app": CrossAppAccessProvider {clientId, clientSecret, issuer, idp: {url, idToken,
//     clientId, clientSecret}}; its assertion callback gets the ID-JAG from the IdP with
//     discoverAndRequestJwtAuthGrant (RFC 8414 discovery + RFC 8693 token exchange).
//
// Prints one final JSON line {"event":"report", ...}: the era and version negotiated, every HTTP
// exchange (method, path, status, Authorization scheme, whether a DPoP proof rode along and its
// nonce, the DPoP-Nonce answered), the tokens' type, the whoami results and any error.

import {
  Client,
  ClientCredentialsProvider,
  CrossAppAccessProvider,
  DpopSession,
  PrivateKeyJwtProvider,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  discoverAndRequestJwtAuthGrant,
} from "@modelcontextprotocol/client";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const config = JSON.parse(process.argv[2] ?? "null");
if (!config?.mcpUrl || !config?.flow) {
  console.error("usage: node oauth_client.mjs '<json config>'");
  process.exit(2);
}

const report = {
  event: "report",
  sdkVersion: JSON.parse(readFileSync(new URL("./node_modules/@modelcontextprotocol/client/package.json", import.meta.url), "utf8")).version,
  flow: config.flow,
  protocolVersion: null,
  exchanges: [],
  authorizations: 0,
  tokenTypes: [],
  accessToken: null,
  dpopThumbprint: null,
  idJagRequests: [],
  calls: [],
  errors: [],
};

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(message) {
  console.log(JSON.stringify(message));
  const { value, done } = await stdinLines.next();
  if (done) throw new Error("the driver closed stdin");
  return JSON.parse(value);
}

function decodeJwtPart(token, index) {
  try {
    return JSON.parse(Buffer.from(token.split(".")[index], "base64url").toString("utf8"));
  } catch {
    return null;
  }
}

// Every HTTP exchange the SDK makes (auth requests included) goes through this fetch.
const recordingFetch = async (input, init = {}) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  let body = null;
  if (typeof init.body === "string") {
    try {
      body = JSON.parse(init.body);
    } catch {
      body = null;
    }
  }
  const proof = headers.get("dpop");
  const proofClaims = proof ? decodeJwtPart(proof, 1) : null;
  const entry = {
    method: init.method ?? "GET",
    path: url.pathname,
    host: url.host,
    rpc: body?.method ?? null,
    scheme: headers.get("authorization")?.split(" ")[0] ?? null,
    session: headers.has("mcp-session-id"),
    dpop: proof ? { htm: proofClaims?.htm, htu: proofClaims?.htu, ath: Boolean(proofClaims?.ath), nonce: proofClaims?.nonce ?? null, raw: proof } : null,
    grantType: init.body instanceof URLSearchParams ? init.body.get("grant_type") : null,
    // the signed artifacts the SDK sent to the token endpoint; the test replays them as a thief would
    clientAssertion: init.body instanceof URLSearchParams ? init.body.get("client_assertion") : null,
    assertion: init.body instanceof URLSearchParams ? init.body.get("assertion") : null,
    status: null,
    nonceAnswered: null,
    error: null,
  };
  report.exchanges.push(entry);
  const response = await fetch(input, init);
  entry.status = response.status;
  entry.nonceAnswered = response.headers.get("dpop-nonce");
  if (response.status >= 400) {
    entry.error = response.headers.get("www-authenticate");
    if (!entry.error) {
      try {
        entry.error = (await response.clone().json())?.error ?? null;
      } catch {
        entry.error = null;
      }
    }
  }
  return response;
};

// The SDK's interactive OAuthClientProvider, in memory.
class InteractiveProvider {
  constructor({ redirectUrl, clientName, clientMetadataUrl, dpop }) {
    this._redirectUrl = redirectUrl;
    if (clientMetadataUrl) this.clientMetadataUrl = clientMetadataUrl;
    this._clientName = clientName;
    this._dpop = dpop ? DpopSession.create() : undefined;
    this._clientInformation = undefined;
    this._tokens = undefined;
    this._codeVerifier = undefined;
    this._discoveryState = undefined;
    this._state = undefined;
    this.callback = undefined;
  }
  get redirectUrl() {
    return this._redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: this._clientName,
      redirect_uris: [this._redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    this._state = crypto.randomUUID();
    return this._state;
  }
  clientInformation() {
    return this._clientInformation;
  }
  saveClientInformation(info) {
    this._clientInformation = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(tokens) {
    this._tokens = tokens;
  }
  async redirectToAuthorization(url) {
    report.authorizations += 1;
    const answer = await ask({ event: "authorize", url: String(url) });
    this.callback = new URL(answer.callback);
  }
  saveCodeVerifier(verifier) {
    this._codeVerifier = verifier;
  }
  codeVerifier() {
    return this._codeVerifier;
  }
  saveDiscoveryState(state) {
    this._discoveryState = state;
  }
  discoveryState() {
    return this._discoveryState;
  }
  dpop() {
    return this._dpop;
  }
  invalidateCredentials(scope) {
    if (scope === "all" || scope === "tokens") this._tokens = undefined;
    if (scope === "all" || scope === "client") this._clientInformation = undefined;
  }
}

function makeProvider() {
  switch (config.flow) {
    case "authorization_code":
      return new InteractiveProvider({
        redirectUrl: config.redirectUrl,
        clientName: config.clientName ?? "TypeScript SDK 2.x e2e client",
        clientMetadataUrl: config.clientMetadataUrl,
        dpop: Boolean(config.dpop),
      });
    case "client_credentials":
      return new ClientCredentialsProvider({
        clientId: config.clientId,
        clientSecret: config.clientSecret,
        scope: config.scope,
        expectedIssuer: config.issuer,
      });
    case "private_key_jwt":
      return new PrivateKeyJwtProvider({
        clientId: config.clientId,
        privateKey: config.privateKeyPem,
        algorithm: config.alg,
        scope: config.scope,
        expectedIssuer: config.issuer,
      });
    case "cross_app":
      return new CrossAppAccessProvider({
        clientId: config.clientId,
        clientSecret: config.clientSecret,
        expectedIssuer: config.issuer,
        fetchFn: recordingFetch,
        assertion: async (ctx) => {
          report.idJagRequests.push({ audience: ctx.authorizationServerUrl, resource: ctx.resourceUrl, scope: ctx.scope ?? null });
          const result = await discoverAndRequestJwtAuthGrant({
            idpUrl: config.idp.url,
            audience: ctx.authorizationServerUrl,
            resource: ctx.resourceUrl,
            idToken: config.idp.idToken,
            clientId: config.idp.clientId,
            clientSecret: config.idp.clientSecret,
            scope: ctx.scope,
            fetchFn: ctx.fetchFn,
          });
          return result.jwtAuthGrant;
        },
      });
    default:
      throw new Error(`unknown flow ${config.flow}`);
  }
}

// "legacy" (the SDK's default): initialize, a 2025-11-25 session; "auto": probe server/discover
// and fall back to initialize; anything else: pinned to that revision (no fallback).
const versionNegotiation = ["legacy", "auto"].includes(config.era) ? { mode: config.era } : { mode: { pin: config.era } };

async function session(provider, label) {
  const open = () => {
    const transport = new StreamableHTTPClientTransport(new URL(config.mcpUrl), { authProvider: provider, fetch: recordingFetch });
    const client = new Client({ name: "ts-sdk-2-oauth-e2e", version: "1.0.0" }, { capabilities: {}, versionNegotiation });
    return { transport, client };
  };
  let { transport, client } = open();
  // Back from the authorization server: the state is ours to check, then finishAuth (RFC 9207 iss)
  // and a new session with the new tokens.
  const reopen = async () => {
    const callback = provider.callback;
    provider.callback = undefined;
    if (callback.searchParams.get("state") !== provider._state) throw new Error("state mismatch on the callback");
    await transport.finishAuth(callback.searchParams);
    await client.close().catch(() => {});
    ({ transport, client } = open());
    await client.connect(transport);
  };
  try {
    await client.connect(transport);
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || !provider.callback) throw error;
    await reopen();
  }
  report.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
  const whoami = async () => {
    try {
      return await client.callTool({ name: "whoami", arguments: {} });
    } catch (error) {
      if (!(error instanceof UnauthorizedError) || !provider.callback) throw error;
      await reopen(); // the refresh was refused: the user authorized again
      return await client.callTool({ name: "whoami", arguments: {} });
    }
  };
  const started = Date.now();
  try {
    for (let i = 0; config.durationMs ? Date.now() - started < config.durationMs : i < (config.calls ?? 1); i += 1) {
      if (i > 0 && config.callIntervalMs) await new Promise((resolve) => setTimeout(resolve, config.callIntervalMs));
      const result = await whoami();
      report.calls.push({ label, at: Date.now() - started, isError: Boolean(result.isError), structured: result.structuredContent ?? null, text: result.content?.[0]?.text ?? null });
    }
  } finally {
    await client.close().catch(() => {});
  }
}

try {
  const provider = makeProvider();
  const saveTokens = provider.saveTokens.bind(provider);
  provider.saveTokens = (tokens, ctx) => {
    report.tokenTypes.push(tokens.token_type);
    report.accessToken = tokens.access_token; // the test replays it as a thief would
    return saveTokens(tokens, ctx);
  };
  if (config.dpop && config.flow !== "authorization_code") {
    // The machine providers leave dpop() undefined; implementing it is how a host opts in.
    const dpopSession = DpopSession.create();
    provider.dpop = () => dpopSession;
  }
  if (provider.dpop) report.dpopThumbprint = (await provider.dpop())?.thumbprint ?? null;
  await session(provider, "first");
  if (config.againAfterMs) {
    await new Promise((resolve) => setTimeout(resolve, config.againAfterMs));
    await session(provider, "again");
  }
} catch (error) {
  report.errors.push(String(error?.stack ?? error));
} finally {
  // Exit once the report is written: a report past the pipe's 64 KiB (a long soak's calls) was cut
  // by an exit right after console.log.
  process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(0));
}
