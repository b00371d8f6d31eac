// Loaded with `node --import ./globsync-shim.mjs`: gives node 20 (Debian 12's) the
// fs.globSync that node 22 added and that @modelcontextprotocol/conformance imports
// ("import { globSync } from 'fs'").  Modules inside that package that import "fs"
// get a module with everything of node:fs plus globSync from the glob package;
// nothing else is touched.  On a node that has fs.globSync this does nothing.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./globsync-hooks.mjs", import.meta.url);
}
