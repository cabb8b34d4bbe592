#!/usr/bin/env bash
# apt-install-missing.sh NAME PKG...: installs those of the Debian packages PKG that are not
# installed yet, saying so as NAME (the calling script); nothing when all are there. Run as root
# when something is missing. Shared by install-deps.sh, install-fuzz-deps.sh, install-vm-deps.sh.
set -euo pipefail
name=$1
shift
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$name: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "$name: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends keeps the image small.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
