#!/usr/bin/env bash
# Installs what the tests need beyond Rust, when it is missing:
# Debian's Chromium and ChromeDriver for the report's browser test
# (tests/report.rs). Quick when everything is there already.
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "test-deps: need root or sudo to install ${need[*]}" >&2; exit 1; }
    sudo="sudo"
fi
echo "test-deps: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
