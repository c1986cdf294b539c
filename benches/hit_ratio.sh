#!/usr/bin/env bash
# hit_ratio.sh: the gets' hit ratio of a cache-aside loop (loadgen --zipf: a get, on a miss a
# set) over Zipf 0.99 keys with values of 100 B to 4 KB (fixed per key), mcb-memcached's
# default bucket against Debian's memcached with the same -m and -t, one after the other.
# The default key count makes the keys' items about twice the cache (2,150 bytes on average).
#
#   benches/hit_ratio.sh [MIB] [KEYS] [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-64}
keys=${2:-$((mib * 1024 * 1024 * 2 / 2150))}
secs=${3:-20}
cargo build --release --locked -p mcb-host -p mcb-bucket-engine
cargo build --release --locked -p mcb-benches --example loadgen
loadgen=$PWD/target/release/examples/loadgen
memcached=$(command -v memcached || echo /usr/bin/memcached)

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }

run() {
    "$loadgen" --port "$1" --conns 4 --secs "$secs" --zipf 0.99 --keys "$keys" \
        --value 100 --value-max 4096
}

port=$(free_port)
"$memcached" -u "$(id -un)" -l 127.0.0.1 -p "$port" -t 2 -m "$mib" &
pids+=($!)
sleep 0.3
mc=$(run "$port")
kill "${pids[-1]}"

port=$(free_port)
"$PWD/target/release/mcb-memcached" -l 127.0.0.1 -p "$port" -t 2 -m "$mib" >/dev/null &
pids+=($!)
sleep 0.3
mcb=$(run "$port")

echo "memcached: $mc"
echo "mcb:       $mcb"
awk -v a="$(echo "$mc" | field misses)" -v b="$(echo "$mcb" | field misses)" \
    -v ha="$(echo "$mc" | field hit_ratio)" -v hb="$(echo "$mcb" | field hit_ratio)" \
    'BEGIN { printf "%d MiB, %d keys: hit ratio memcached %.4f, ours %.4f; misses ours/memcached %.2fx (per get)\n", '"$mib"', '"$keys"', ha, hb, ((1 - hb) / (1 - ha)) }'
