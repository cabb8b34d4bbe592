#!/usr/bin/env bash
# Installs the manifest validator's npm packages (test-only, pinned) under BUILD_DIR/deploy-node,
# once: kubernetes-models, whose JSON schemas are generated from Kubernetes' own OpenAPI document
# (Kubernetes 1.33 in 4.5.1) and compiled into ajv validators, and yaml to read the manifests.
# Exit 77 (ctest's skip code) when node or npm is missing or the registry cannot be reached.
set -euo pipefail
build_dir=${1:?usage: setup.sh BUILD_DIR}
packages=(kubernetes-models@4.5.1 @kubernetes-models/validate@4.0.0 @kubernetes-models/base@5.0.1
  @kubernetes-models/apimachinery@2.2.0 yaml@2.8.4)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed to validate the Kubernetes manifests (apt-get install nodejs npm)"
  exit 77
fi
prefix="$build_dir/deploy-node"
stamp="$prefix/installed"
if [[ -f $stamp && $(cat "$stamp") == "${packages[*]}" ]]; then
  exit 0
fi
mkdir -p "$prefix"
for _ in 1 2; do
  if npm install --no-audit --no-fund --no-save --prefix "$prefix" "${packages[@]}" >&2; then
    echo "${packages[*]}" >"$stamp"
    exit 0
  fi
  sleep 5
done
echo "SKIP: npm could not install ${packages[*]} (is the npm registry reachable?)"
exit 77
