#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are missing.
# As root it runs apt-get; otherwise it prints the exact command and fails,
# so that `make` stops with something the user can copy.
set -euo pipefail

missing=()
for pkg in "$@"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "ds-mlir: missing Debian packages: ${missing[*]}" >&2
  echo "ds-mlir: run as root:  apt-get update && $cmd" >&2
  exit 1
fi

echo "ds-mlir: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be stale on a fresh image; refresh them once.
apt-get update -qq
# shellcheck disable=SC2086
$cmd
