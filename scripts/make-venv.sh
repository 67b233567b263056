#!/usr/bin/env bash
# Creates (once) and updates the project's Python virtual environment with
# scripts/requirements.txt. It lives outside the tree so that clean clones
# and repeated CI runs reuse it.
set -euo pipefail
venv=${DS_VENV:-$HOME/.cache/ds-mlir/venv}
req=$(cd "$(dirname "$0")" && pwd)/requirements.txt
stamp="$venv/.ds-requirements"
if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$req" "$stamp"; then
  exit 0
fi
echo "ds-mlir: preparing the Python environment in $venv (torch is large; first time only)"
# Debian's interpreter (python3-venv): a pyenv or other python3 on PATH may lack ssl.
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
