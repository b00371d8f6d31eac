// Loaded with `node --import ./as-node18.mjs` before globsync-shim.mjs: takes away
// the globals that node 20 has and Debian 12's node 18 lacks (File), so that
// tests/test-mcp-modern.c checks the shim against node 18 on any node.
delete globalThis.File;
