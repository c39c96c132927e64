#!/usr/bin/env bash
# Runs slurp under a real cgroup v2 memory controller: boots Debian's
# kernel in a small guest (qemu) whose only cgroup hierarchy is the
# unified one, with an initramfs holding busybox, the slurp binary with
# its libraries, and a program that allocates memory; /init runs the
# commands of a scenario there and prints what they print between
# markers, then powers the guest off.
#
# Why a guest: a machine whose memory controller is bound to cgroup v1
# (this one, and many older sites) cannot give it to v2, so the v2 path of
# `runtime/src/exec/memory.rs` can only run on a kernel booted so.
#
#   scripts/cgroup-v2-vm.sh SLURP SCENARIO   # SCENARIO: a shell script run in the guest
#   scripts/cgroup-v2-vm.sh --probe          # exit 0 when a guest can boot here
#
# The guest is emulated (TCG): KVM inside this machine's own virtual
# machine hangs at boot, and an emulated boot takes seconds.
#
# Needs qemu-system-x86_64, a kernel in /boot (linux-image-amd64),
# busybox-static and a C compiler with a static libc; tests/memory.rs skips
# its guest test, saying which is missing, when one is not here.
set -euo pipefail

kernel() { ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1; }

missing() {
    command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 (apt-get install qemu-system-x86)"; return; }
    [[ -n "$(kernel)" ]] || { echo "a kernel in /boot (apt-get install linux-image-amd64)"; return; }
    # The applet list is read whole, not piped to `grep -q`: busybox writes
    # it one name per write, so a grep that stops at the match leaves it to
    # die of SIGPIPE, which pipefail turns into "no busybox" (1 probe in ~150).
    local applets=""
    [[ -x /bin/busybox ]] && applets=$'\n'$(/bin/busybox --list)$'\n'
    [[ "$applets" == *$'\npoweroff\n'* && "$(file -L /bin/busybox 2>/dev/null)" == *static* ]] \
        || { echo "a static busybox (apt-get install busybox-static)"; return; }
    command -v cc >/dev/null || { echo "a C compiler"; return; }
    command -v cpio >/dev/null || { echo "cpio"; return; }
}

if [[ "${1:-}" == --probe ]]; then
    why=$(missing)
    if [[ -n "$why" ]]; then echo "$why"; exit 1; fi
    exit 0
fi

slurp=$(readlink -f "$1")
scenario=$2
why=$(missing)
[[ -z "$why" ]] || { echo "cannot boot a guest here: no $why" >&2; exit 2; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,proc,sys,dev,tmp,work,etc}
cp /bin/busybox "$root/bin/busybox"
for tool in sh mount mkdir cat echo ls sleep poweroff grep sed wc head tail true false env chmod; do
    ln -s busybox "$root/bin/$tool"
done
# slurp and the shared libraries it loads, where the loader looks for them.
# (Debug information stripped: a debug build's would not fit the guest.)
strip --strip-debug -o "$root/bin/slurp" "$slurp"
ldd "$slurp" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
# Allocates (and touches) N MiB, a little at a time, then says so: the
# same pace as tests/memory.rs's Python hog.
cat > "$root/hog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    struct timespec pause = {0, 5000000};
    for (int i = 0; i < n; i++) {
        char *chunk = malloc(1 << 20);
        if (!chunk) return 3;
        memset(chunk, 1, 1 << 20);
        if (i % 8 == 0) nanosleep(&pause, NULL);
    }
    printf("allocated %d\n", n);
    return 0;
}
EOF
cc -O2 -static -o "$root/bin/hog" "$root/hog.c"
rm "$root/hog.c"
cp "$scenario" "$root/scenario.sh"
cat > "$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
export PATH=/bin HOME=/tmp
cd /work
echo "=== scenario begins"
sh /scenario.sh 2>&1
echo "=== scenario ended: $?"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$root.cpio.gz"
trap 'rm -rf "$root" "$root.cpio.gz" "$root.console"' EXIT
# cgroup_no_v1=all: no controller is bound to v1, so memory is v2's.
timeout 300 qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1024 -nographic -no-reboot \
    -kernel "$(kernel)" -initrd "$root.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all init=/init" \
    </dev/null | tr -d "\r" > "$root.console" || true
sed -n "/=== scenario begins/,/=== scenario ended/p" "$root.console"
# A guest that did not get through its scenario: what its console said.
if ! grep -q "=== scenario ended" "$root.console"; then
    echo "the guest did not finish its scenario; the end of its console:" >&2
    tail -c 3000 "$root.console" >&2
    exit 1
fi
