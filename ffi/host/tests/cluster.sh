#!/usr/bin/env bash
# cluster.sh: three mcb-memcached nodes behind twemproxy (Debian's nutcracker) with ketama and
# host ejection, and through pymemcache's HashClient (tests/cluster.py says what is checked).
# Loopback only, every wait bounded. Not run by `cargo test`; .ci/run calls it.
#
# Needs: cargo, python3; installs (when missing, as root) nutcracker and pymemcache.
# MCB_PROFILE=debug reuses a debug build instead of building --release.
set -euo pipefail
cd "$(dirname "$0")/../../.."
profile=${MCB_PROFILE:-release}

if ! command -v nutcracker >/dev/null && [ ! -x /usr/sbin/nutcracker ]; then
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends nutcracker
fi
if ! python3 -c 'import pymemcache' 2>/dev/null; then
    timeout 300 python3 -m pip install -q 'pymemcache==4.0.0'
fi
nutcracker=$(command -v nutcracker || echo /usr/sbin/nutcracker)

if [ "$profile" = release ]; then
    cargo build --release --locked -p mcb-host -p mcb-bucket-engine
else
    cargo build --locked -p mcb-host -p mcb-bucket-engine
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
timeout 300 python3 ffi/host/tests/cluster.py "$PWD/target/$profile/mcb-memcached" "$nutcracker" "$work"
