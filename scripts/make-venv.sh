#!/usr/bin/env bash
# Creates (once) and updates the project's Python virtual environment with
# scripts/requirements.txt. It lives outside the tree so that clean clones
# and repeated CI runs reuse it. Every run also makes the venv's ds_torch an
# editable install of this checkout's python/ (the venv is shared by every
# clone on the machine: the last one to run `make deps` is the one it sees).
set -euo pipefail
venv=${DS_VENV:-$HOME/.cache/ds-mlir/venv}
root=$(cd "$(dirname "$0")/.." && pwd)
req=$root/scripts/requirements.txt
stamp="$venv/.ds-requirements"

# ds_torch of this checkout, editable (no network: --no-deps and the venv's
# own setuptools). Cheap when it is already in place.
link_ds_torch() {
  local here
  here=$(cd "$root/python/ds_torch" && pwd -P)
  # find_spec locates ds_torch without importing it (and torch).
  if [[ "$(cd / && env -u PYTHONPATH "$venv/bin/python" -c \
        'import importlib.util as u, os; s = u.find_spec("ds_torch")
print(os.path.dirname(os.path.realpath(s.origin)) if s and s.origin else "")' \
        2>/dev/null)" == "$here" ]]; then
    return 0
  fi
  echo "ds-mlir: installing $root/python (ds_torch) into $venv, editable"
  (cd / && env -u PYTHONPATH PYTHONWARNINGS="ignore:Editable installation" \
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation -e "$root/python")
}

if [[ -x "$venv/bin/python" && -f "$stamp" ]] && cmp -s "$req" "$stamp"; then
  link_ds_torch
  exit 0
fi
echo "ds-mlir: preparing the Python environment in $venv (torch is large; first time only)"
# Debian's interpreter (python3-venv): a pyenv or other python3 on PATH may lack ssl.
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
# --no-build-isolation builds with the venv's setuptools; Python 3.12's venv
# module no longer installs one.
if ! "$venv/bin/python" -c 'import setuptools' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'setuptools>=64'
fi
cp "$req" "$stamp"
link_ds_torch
