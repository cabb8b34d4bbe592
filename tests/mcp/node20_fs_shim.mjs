// Preloaded (node --import) on Node < 22 only: @modelcontextprotocol/conformance imports
// fs.globSync, which Node 22 added, and fails to load without it. Only its tier-check command
// calls it; the `server` command never does. This gives that one module an `fs` with a stub.
import { register } from "node:module";

const fsWithGlob = `
export * from "node:fs";
import fs from "node:fs";
export default fs;
export function globSync() { throw new Error("fs.globSync needs Node 22 (stubbed for the conformance runner)"); }
`;
const hooks = `
const shim = ${JSON.stringify("data:text/javascript," + encodeURIComponent(fsWithGlob))};
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/@modelcontextprotocol/conformance/"))
    return { url: shim, shortCircuit: true };
  return next(specifier, context);
}
`;
register("data:text/javascript," + encodeURIComponent(hooks));
