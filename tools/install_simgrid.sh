#!/usr/bin/env bash
# Install SimGrid's Python bindings for wacoll.plans.sim.simgrid, in seconds: Debian's
# python3-simgrid (SimGrid 3.32, built for Python 3.11), made importable from the
# project's virtual environment by a link to its one extension module in the
# environment's site-packages (not the whole of Debian's dist-packages).
#
#   tools/install_simgrid.sh [VENV]      (default .venv; as root, or with sudo)
#
# Elsewhere (another Python, no apt): pip install simgrid builds SimGrid from source
# (cmake, a C++ compiler and Boost; many minutes; SimGrid 4.1's bindings did not build
# against pybind11 3 here).
set -euo pipefail
venv=${1:-.venv}
python="$venv/bin/python"
[ -x "$python" ] || { echo "install_simgrid: no $python" >&2; exit 1; }
abi=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$abi" != "3.11" ]; then
    echo "install_simgrid: Debian's python3-simgrid is built for Python 3.11, $python is" \
         "$abi; use pip install simgrid instead" >&2
    exit 1
fi
command -v apt-get >/dev/null || {
    echo "install_simgrid: no apt-get; use pip install simgrid" >&2; exit 1; }
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
if ! dpkg -s python3-simgrid >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -q python3-simgrid >/dev/null \
        || { $sudo apt-get update -q >/dev/null && \
             $sudo apt-get install -y -q python3-simgrid >/dev/null; }
fi
module=$(dpkg -L python3-simgrid | grep -E '/simgrid\.cpython-311[^/]*\.so$' | head -n 1)
[ -n "$module" ] || { echo "install_simgrid: python3-simgrid has no module for 3.11" >&2
                      exit 1; }
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
ln -sf "$module" "$site/"
"$python" -c 'from wacoll.plans.sim.simgrid import simgrid_unavailable as u; r = u(); print("SimGrid:", r or "ready")'
