#!/usr/bin/env bash
# A real Flux for the tests: flux-core 0.88.0 built from its public source
# in ../shared/flux (see its README), installed under $SLURP_FLUX_PREFIX
# (default /opt/flux-0.88.0). Built only when missing: about 5 minutes on
# 2 cores the first time, nothing after.
#
#   scripts/local-flux.sh build     build and install it if missing
#   scripts/local-flux.sh prefix    print where it is (or would be)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${SLURP_FLUX_PREFIX:-/opt/flux-0.88.0}
source=${SLURP_FLUX_SOURCE:-$PWD/../shared/flux/flux-core-0.88.0.tar.xz}

case "${1:-build}" in
prefix)
    echo "$prefix"
    ;;
build)
    if [ -x "$prefix/bin/flux" ]; then
        exit 0
    fi
    if [ ! -f "$source" ]; then
        echo "local-flux: no flux-core source at $source; the Flux tests will say they are skipped" >&2
        exit 0
    fi
    deps=(autoconf automake libtool make pkg-config gcc g++ libc6-dev libzmq3-dev uuid-dev
        libjansson-dev liblz4-dev libarchive-dev libhwloc-dev libsqlite3-dev lua5.1 liblua5.1-dev
        lua-posix python3-dev python3-cffi python3-ply python3-setuptools python3-yaml
        python3-jsonschema aspell aspell-en libmunge-dev libcurl4-openssl-dev jq time)
    missing=()
    for d in "${deps[@]}"; do
        dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "ok installed" || missing+=("$d")
    done
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if [ ${#missing[@]} -gt 0 ]; then
        echo "local-flux: installing ${missing[*]}" >&2
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "local-flux: building flux-core 0.88.0 into $prefix (about 5 minutes)" >&2
    tar -xJf "$source" -C "$work"
    cd "$work"/flux-core-0.88.0
    FLUX_VERSION=0.88.0 ./autogen.sh >"$work/autogen.log" 2>&1
    PYTHON=/usr/bin/python3 ./configure --prefix="$prefix" --disable-docs >"$work/configure.log" 2>&1 \
        || { tail -20 "$work/configure.log" >&2; exit 1; }
    make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
    $sudo make install >"$work/install.log" 2>&1
    ;;
*)
    echo "usage: $0 build|prefix" >&2
    exit 2
    ;;
esac
