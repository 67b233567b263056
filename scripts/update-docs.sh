#!/usr/bin/env bash
# Copies the dialect, interface and pass reference that mlir-tblgen generated
# into docs/, where they are committed so that readers need no build.
# Usage: scripts/update-docs.sh BUILD_DIR  (after `ninja -C BUILD_DIR ds-docs`)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/docs/generated"
cp "$build/docs/Dialects/DSDialect.md" "$root/docs/generated/DSDialect.md"
cp "$build/docs/Interfaces/DSInterfaces.md" "$root/docs/generated/DSInterfaces.md"
cp "$build/docs/DSPasses.md" "$root/docs/generated/DSPasses.md"
cp "$build/docs/DSConversionPasses.md" "$root/docs/generated/DSConversionPasses.md"
echo "docs/generated/ updated from $build/docs"
