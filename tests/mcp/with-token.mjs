// Loaded with `node --import ./with-token.mjs`: adds "Authorization: Bearer $MCP_TOKEN" to
// every HTTP request this node process makes to the origin of $MCP_URL, whoever makes it
// (fetch, or undici's request as @modelcontextprotocol/conformance uses).  The conformance
// suite has no option for a header, and `sandstep mcp --http` refuses a request without its
// token; this changes nothing else about the requests.  Both fetch and undici send through
// the one global dispatcher set here.
import { Agent, setGlobalDispatcher } from "undici";

const token = process.env.MCP_TOKEN;
const url = process.env.MCP_URL;
if (!token || !url) {
  console.error("with-token.mjs: set MCP_TOKEN (the server's bearer token) and MCP_URL (its endpoint)");
  process.exit(2);
}
const origin = new URL(url).origin;

// undici hands headers over as an object, a flat [name, value, ...] array or [name, value] pairs.
function withToken(headers) {
  const flat = [];
  if (Array.isArray(headers)) {
    for (const item of headers) {
      if (Array.isArray(item)) flat.push(String(item[0]), String(item[1]));
      else flat.push(String(item));
    }
  } else if (headers && typeof headers[Symbol.iterator] === "function") {
    for (const [name, value] of headers) flat.push(String(name), String(value));
  } else if (headers) {
    for (const [name, value] of Object.entries(headers)) {
      for (const v of Array.isArray(value) ? value : [value]) flat.push(name, String(v));
    }
  }
  const out = [];
  for (let i = 0; i < flat.length; i += 2)
    if (flat[i].toLowerCase() !== "authorization") out.push(flat[i], flat[i + 1]);
  out.push("authorization", `Bearer ${token}`);
  return out;
}

setGlobalDispatcher(
  new Agent().compose((dispatch) => (options, handler) => {
    if (options.origin && new URL(String(options.origin)).origin === origin)
      options = { ...options, headers: withToken(options.headers) };
    return dispatch(options, handler);
  })
);
