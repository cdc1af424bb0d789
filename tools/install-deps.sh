#!/usr/bin/env bash
# Installs the Debian packages given as arguments when any is missing.
# Does nothing when all are present. Uses apt-get as root, or through sudo
# when sudo works without a password; otherwise prints the exact command.
set -euo pipefail

missing=()
for pkg in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "matrix-cpp: installing missing packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo)
else
  echo "matrix-cpp: these packages are missing and I cannot install them without root." >&2
  echo "Run:  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_install() { "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; }
if ! apt_install; then
  # A fresh machine may have stale or empty package lists.
  "${as_root[@]}" apt-get update -q </dev/null
  apt_install
fi
