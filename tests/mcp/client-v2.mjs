#!/usr/bin/env node
// A real MCP client for the tests, on the official v2 TypeScript SDK
// (@modelcontextprotocol/client 2.x), the newest one on npm and the first that speaks
// the 2026-07-28 revision (server/discover, _meta on every request, no initialize).
// tests/test-mcp.c runs it and asserts on the one JSON object it prints.
//
// Usage:
//   node client-v2.mjs stdio COMMAND [ARGS...]   spawn the server and talk over its stdin/stdout
//   node client-v2.mjs http URL                  Streamable HTTP
// Environment:
//   ERA=2026-07-28 (default: pin it, never fall back) | auto (probe server/discover, fall back
//       to initialize) | legacy (the 2025 initialize handshake)
//   CALLS='[{"name": TOOL, "arguments": {...}}, ...]'   tools/call requests, made in order
//   MCP_TOKEN=TOKEN                                    http: the server's bearer token
//
// Prints {"era", "protocolVersion", "serverInfo", "capabilities", "instructions", "tools",
// "calls": [{"name", "result"} | {"name", "error": {"code", "message"}}]} on stdout.
// Exit status: 0 when the session ran, 1 on a connection or protocol failure.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [mode, target, ...rest] = process.argv.slice(2);
if (!mode || !target) {
  console.error("usage: client-v2.mjs stdio COMMAND [ARGS...] | client-v2.mjs http URL");
  process.exit(2);
}
const era = process.env.ERA || "2026-07-28";
const versionNegotiation = era === "legacy" || era === "auto" ? { mode: era } : { mode: { pin: era } };

let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, stderr: "inherit" });
} else if (mode === "http") {
  const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error(`client-v2.mjs: unknown mode '${mode}'`);
  process.exit(2);
}

const report = { calls: [] };
const client = new Client({ name: "sandstep-test-client-v2", version: "0.0.1" }, { versionNegotiation });
const timer = setTimeout(() => {
  console.error("client-v2.mjs: TIMEOUT");
  process.exit(1);
}, 60000);

try {
  await client.connect(transport);
  report.era = client.getProtocolEra();
  report.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
  report.serverInfo = client.getServerVersion() ?? null;
  report.capabilities = client.getServerCapabilities() ?? null;
  report.instructions = client.getInstructions() ?? null;

  const { tools } = await client.listTools();
  report.tools = tools;

  for (const call of JSON.parse(process.env.CALLS || "[]")) {
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      report.calls.push({ name: call.name, result });
    } catch (e) {
      report.calls.push({ name: call.name, error: { code: e?.code ?? null, message: String(e?.message ?? e) } });
    }
  }
  await client.close();
  clearTimeout(timer);
  console.log(JSON.stringify(report));
  process.exit(0);
} catch (e) {
  console.error("client-v2.mjs: FAIL:", e?.code ?? "", e?.message ?? e);
  process.exit(1);
}
