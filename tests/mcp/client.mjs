#!/usr/bin/env node
// A real MCP client for the tests: the official TypeScript SDK (@modelcontextprotocol/sdk 1.x),
// used as its documentation shows.  tests/test-mcp.c runs it and asserts
// on the one JSON object it prints, so the checks live in C and this stays generic.
//
// Usage:
//   node client.mjs stdio COMMAND [ARGS...]   spawn the server and talk over its stdin/stdout
//   node client.mjs http URL                  Streamable HTTP
// Environment:
//   CALLS='[{"name": TOOL, "arguments": {...}}, ...]'   tools/call requests, made in order
//   MINIMAL_ENV=1                                      stdio: start the server with the SDK's default
//                                                      environment (HOME, PATH, ...), not ours
//   MCP_TOKEN=TOKEN                                    http: the server's bearer token, sent as
//                                                      "Authorization: Bearer TOKEN" on every request
//
// Prints {"protocolVersion", "serverInfo", "capabilities", "instructions", "sessionId",
// "tools", "calls": [{"name", "result"} | {"name", "error": {"code", "message"}}],
// "terminated"} on stdout.  Exit status: 0 when the session ran (tool failures and JSON-RPC
// errors of single calls are data, not failures), 1 on a connection or protocol failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, ...rest] = process.argv.slice(2);
if (!mode || !target) {
  console.error("usage: client.mjs stdio COMMAND [ARGS...] | client.mjs http URL");
  process.exit(2);
}

let transport;
if (mode === "stdio") {
  // Pass our whole environment: the SDK hands a child only HOME, PATH and a few others
  // otherwise, and the server needs SANDSTEP_STATE_DIR and its identity.  MINIMAL_ENV=1: the
  // SDK's default, as a client configured without an `env` block starts its servers.
  const env = process.env.MINIMAL_ENV === "1" ? undefined : { ...process.env };
  transport = new StdioClientTransport({ command: target, args: rest, env, stderr: "inherit" });
} else if (mode === "http") {
  // The SDK's documented way to add a header to every request it makes.
  const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error(`client.mjs: unknown mode '${mode}'`);
  process.exit(2);
}

// The SDK tells the transport which version initialize negotiated; record it for both kinds.
let negotiated = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (version) => {
  negotiated = version;
  if (setVersion) setVersion(version);
};

const report = { calls: [] };
const client = new Client({ name: "sandstep-test-client", version: "0.0.1" });
const timer = setTimeout(() => {
  console.error("client.mjs: TIMEOUT");
  process.exit(1);
}, 60000);

try {
  await client.connect(transport); // initialize + notifications/initialized
  report.protocolVersion = negotiated;
  report.serverInfo = client.getServerVersion();
  report.capabilities = client.getServerCapabilities();
  report.instructions = client.getInstructions();
  if (mode === "http") report.sessionId = transport.sessionId ?? null;

  const { tools } = await client.listTools(); // the SDK validates every inputSchema here
  report.tools = tools;

  for (const call of JSON.parse(process.env.CALLS || "[]")) {
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      report.calls.push({ name: call.name, result });
    } catch (e) {
      report.calls.push({ name: call.name, error: { code: e?.code ?? null, message: String(e?.message ?? e) } });
    }
  }

  if (mode === "http") {
    await transport.terminateSession(); // DELETE with Mcp-Session-Id
    report.terminated = transport.sessionId === undefined;
  }
  await client.close();
  clearTimeout(timer);
  console.log(JSON.stringify(report));
  process.exit(0);
} catch (e) {
  console.error("client.mjs: FAIL:", e?.message ?? e);
  process.exit(1);
}
