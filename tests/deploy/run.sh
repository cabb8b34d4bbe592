#!/usr/bin/env bash
# ctest entry (deploy_manifests): validates deploy/ offline. Kubernetes' schemas come from npm
# (setup.sh, pinned; exit 77, ctest's skip, without node or npm); the kustomization is built
# with `kustomize build` or, where only kubectl is installed, `kubectl kustomize` (both run
# offline); nginx -t and execbox itself read the configuration files. validate.cjs has the checks.
#   run.sh BUILD_DIR [EXECBOX]
set -uo pipefail
build_dir=${1:?usage: run.sh BUILD_DIR [EXECBOX]}
execbox=${2:--}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bash "$here/setup.sh" "$build_dir"
status=$?
[[ $status -eq 0 ]] || exit $status

built=-
out="$build_dir/deploy-node/kustomize-build.yaml"
if command -v kustomize >/dev/null; then
  kustomize build "$repo/deploy" >"$out" && built=$out
elif command -v kubectl >/dev/null; then
  kubectl kustomize "$repo/deploy" >"$out" && built=$out
else
  echo "skip kustomize build: neither kustomize nor kubectl is installed (the plain manifests are still checked)"
fi
if [[ $built == - ]] && { command -v kustomize || command -v kubectl; } >/dev/null; then
  echo "FAIL kustomize build of deploy/ failed"
  exit 1
fi
exec node "$here/validate.cjs" "$build_dir/deploy-node" "$repo" "$built" "$execbox"
