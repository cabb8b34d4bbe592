#!/usr/bin/env bash
# `make run`: starts the server (HTTP API + MCP at /mcp) in the foreground on
# ${EXECBOX_LISTEN:-127.0.0.1:8080}. With EXECBOX_API_KEYS unset it prints a generated token.
set -eu
execbox=${1:-build/execbox}
listen=${EXECBOX_LISTEN:-127.0.0.1:8080}
cat >&2 <<MSG
execbox: starting the server on $listen (Ctrl-C or SIGTERM stops it gracefully). Try:
  curl -s -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' \\
       -d '{"code": "import numpy as np\\nnp.arange(6).reshape(2, 3).sum()"}' http://$listen/v1/execute
  curl -s http://$listen/readyz
  (\$TOKEN: one of EXECBOX_API_KEYS, or the token printed below)
  'make examples' runs examples/ through the one-shot CLI instead.
MSG
exec "$execbox" serve --listen "$listen"
