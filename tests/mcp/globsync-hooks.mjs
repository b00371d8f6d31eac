// Module hooks of globsync-shim.mjs: "fs" and "node:fs", imported from inside
// @modelcontextprotocol/conformance, resolve to globsync-fs.mjs.
const shim = new URL("./globsync-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/node_modules/@modelcontextprotocol/conformance/"))
    return { url: shim, shortCircuit: true };
  return nextResolve(specifier, context);
}
