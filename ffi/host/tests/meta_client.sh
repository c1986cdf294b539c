#!/usr/bin/env bash
# meta_client.sh: the meta-memcache client from PyPI (meta commands, stale-while-revalidate,
# recache) against mcb-memcached on the built-in engine, -t 4 and 1 (tests/meta_client.py says
# what is checked). Loopback only, bounded. Not run by `cargo test`; .ci/run calls it.
#
# Needs: cargo, python3; installs (when missing) meta-memcache.
# MCB_PROFILE=debug reuses a debug build instead of building --release.
set -euo pipefail
cd "$(dirname "$0")/../../.."
profile=${MCB_PROFILE:-release}

if ! python3 -c 'import meta_memcache' 2>/dev/null; then
    timeout 300 python3 -m pip install -q 'meta-memcache==4.3.0'
fi
if [ "$profile" = release ]; then
    cargo build --release --locked -p mcb-host -p mcb-bucket-engine
else
    cargo build --locked -p mcb-host -p mcb-bucket-engine
fi
work=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

for threads in 4 1; do
    echo "== meta-memcache against mcb-memcached -t $threads"
    # A file per run, made before the server starts: the background child opens its output
    # only once it runs, so a shared file could still show the previous run's (dead) port to
    # the loop below.
    out="$work/out.$threads"
    : >"$out"
    "target/$profile/mcb-memcached" -p 0 -t "$threads" >"$out" &
    pid=$!
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/^mcb-memcached listening on .*:\([0-9]*\)$/\1/p' "$out")
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "mcb-memcached did not start"; exit 1; }
    timeout 120 python3 ffi/host/tests/meta_client.py "$port"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
done
