#!/usr/bin/env bash
# Installs and starts what the tests need beyond Rust, when it is missing:
# Debian's Chromium and ChromeDriver for the report's browser test
# (tests/report.rs), GNU parallel for the conformance test of slurp's
# parallel command line (tests/parallel.rs), MPICH for PMI and launchers
# (tests/mpi.rs), and a one-node Slurm on localhost for the Slurm tests
# (tests/slurm.rs; scripts/local-slurm.sh), and NumPy for the check of the
# learned policy's observation against an independent computation
# (fair/tests/observe_v2.rs), pytest for the Python client
# (tests/python.rs), and qemu, a Debian kernel and a static busybox for the
# cgroup v2 memory test in a guest (tests/memory.rs;
# scripts/cgroup-v2-vm.sh). Quick when all is there already.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
[ -x /usr/bin/parallel ] || need+=(parallel)
# MPICH, for slurp's PMI and `launcher=mpirun` (tests/mpi.rs).
[ -x /usr/bin/mpicc ] || need+=(mpich libmpich-dev)
# A guest booted with cgroup v2 only, for memory.max (tests/memory.rs).
[ -x /usr/bin/qemu-system-x86_64 ] || need+=(qemu-system-x86)
ls /boot/vmlinuz-* >/dev/null 2>&1 || need+=(linux-image-amd64)
file -L /bin/busybox 2>/dev/null | grep -q static || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v file >/dev/null || need+=(file)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "test-deps: need root or sudo to install ${need[*]}" >&2; exit 1; }
        sudo="sudo"
    fi
    echo "test-deps: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! python3 -c 'import numpy' 2>/dev/null; then
    echo "test-deps: installing numpy (PyPI)" >&2
    python3 -m pip install -q numpy || python3 -m pip install -q --break-system-packages numpy
fi
# onnx, for the trainer's model tools (fair/trainer/ensemble.py, tests/train.rs).
if ! python3 -c 'import onnx' 2>/dev/null; then
    echo "test-deps: installing onnx (PyPI)" >&2
    python3 -m pip install -q onnx || python3 -m pip install -q --break-system-packages onnx
fi
# pytest, for the Python client's tests (python/tests, run by tests/python.rs).
if ! python3 -c 'import pytest' 2>/dev/null; then
    echo "test-deps: installing pytest (PyPI)" >&2
    python3 -m pip install -q pytest || python3 -m pip install -q --break-system-packages pytest
fi

scripts/local-slurm.sh start
scripts/local-flux.sh build
