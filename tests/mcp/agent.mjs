#!/usr/bin/env node
// A tiny external "agent" for `sandstep tools --handle=H -- node agent.mjs COMMAND [EXIT]`:
// it reaches the sandbox's tools through $SANDSTEP_MCP_URL, with the bearer token in
// $SANDSTEP_MCP_TOKEN, with the official SDK, lists
// them, runs COMMAND with run_command, prints what it got and exits with EXIT (default 0),
// so a test can check that the agent's output and exit status become the step's.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [command, exitStatus = "0"] = process.argv.slice(2);
const url = process.env.SANDSTEP_MCP_URL;
const token = process.env.SANDSTEP_MCP_TOKEN;
if (!url || !token || !command) {
  console.error("agent.mjs: needs $SANDSTEP_MCP_URL, $SANDSTEP_MCP_TOKEN and a COMMAND argument");
  process.exit(2);
}

const client = new Client({ name: "sandstep-test-agent", version: "0.0.1" });
try {
  const requestInit = { headers: { Authorization: `Bearer ${token}` } };
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
  const { tools } = await client.listTools();
  console.log("tools: " + tools.map((t) => t.name).sort().join(","));
  const result = await client.callTool({ name: "run_command", arguments: { command } });
  console.log("isError: " + (result.isError === true));
  for (const item of result.content) if (item.type === "text") console.log("text: " + item.text);
  await client.close();
} catch (e) {
  console.error("agent.mjs: FAIL:", e?.message ?? e);
  process.exit(1);
}
process.exit(Number(exitStatus));
