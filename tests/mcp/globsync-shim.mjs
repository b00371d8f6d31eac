// Loaded with `node --import ./globsync-shim.mjs`: gives an older node (Debian 12's
// is node 18.20.4) what @modelcontextprotocol/conformance expects of node 22:
// - fs.globSync (node 22; "import { globSync } from 'fs'"): modules inside that
//   package that import "fs" get a module with everything of node:fs plus
//   globSync from the glob package;
// - the global File (node 20; node 18 has it in node:buffer only), which the
//   suite's HTTP client (undici) uses when it loads.
// On a node that has them this does nothing.
import fs from "node:fs";
import { File } from "node:buffer";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./globsync-hooks.mjs", import.meta.url);
}
if (typeof globalThis.File === "undefined" && typeof File === "function") {
  globalThis.File = File;
}
