// node:fs with globSync from the glob package (see globsync-shim.mjs).
import fs from "node:fs";
import { globSync } from "glob";

export * from "node:fs";
export { globSync };
export default { ...fs, globSync };
