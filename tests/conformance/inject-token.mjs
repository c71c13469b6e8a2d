// Preloaded into the conformance suite (NODE_OPTIONS=--import): every HTTP request to the fixture
// server's origin carries the bearer token minted by run.py. The suite itself sends no token.
// It replaces undici's global dispatcher, which Node's fetch and the undici package both use, and
// wraps node:http's request(), which a few scenarios use for raw requests.
import http from "node:http";
import { Agent, setGlobalDispatcher } from "undici";

const token = process.env.MCP_CONFORMANCE_TOKEN;
const origin = process.env.MCP_CONFORMANCE_ORIGIN;

function withAuthorization(headers) {
  const value = `Bearer ${token}`;
  if (headers == null) return { authorization: value };
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() === "authorization") return headers;
    }
    return [...headers, "authorization", value];
  }
  if (typeof headers[Symbol.iterator] === "function") {
    return withAuthorization([...headers].flat());
  }
  for (const name of Object.keys(headers)) {
    if (name.toLowerCase() === "authorization") return headers;
  }
  return { ...headers, authorization: value };
}

const inject = (dispatch) => (options, handler) => {
  const target = options.origin ? new URL(String(options.origin)).origin : "";
  if (token && origin && target === origin) {
    options = { ...options, headers: withAuthorization(options.headers) };
  }
  return dispatch(options, handler);
};

if (token && origin) {
  setGlobalDispatcher(new Agent().compose(inject));
}

const originalRequest = http.request;
http.request = function request(options, ...rest) {
  if (token && origin && options && typeof options === "object" && !(options instanceof URL)) {
    const host = options.hostname ?? options.host;
    if (`http://${host}:${options.port}` === origin) {
      options = { ...options, headers: withAuthorization(options.headers) };
    }
  }
  return originalRequest.call(this, options, ...rest);
};
