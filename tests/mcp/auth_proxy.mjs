// A loopback reverse proxy that adds `Authorization: Bearer TOKEN` to every request: the MCP
// conformance runner's client sends no credentials, and execbox serve requires them. Everything
// else (Host and Origin included, which the DNS-rebinding scenario sets) passes unchanged, and
// responses stream through (SSE); a client that disconnects disconnects the upstream request.
// Usage: node auth_proxy.mjs TARGET_ORIGIN TOKEN   (prints "listening on http://localhost:PORT")
import http from "node:http";

const [target, token] = process.argv.slice(2);
const upstream = new URL(target);

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const forward = http.request({
    hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers,
  }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  forward.on("error", () => res.destroy());
  res.on("close", () => { if (!res.writableFinished) forward.destroy(); });
  req.pipe(forward);
});
server.listen(0, "127.0.0.1", () => {
  console.log(`listening on http://localhost:${server.address().port}`);
});
