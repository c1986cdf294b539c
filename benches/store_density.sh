#!/usr/bin/env bash
# store_density.sh: items kept per cache size, mcb-memcached's built-in storage engine against
# Debian's memcached on the same input (the fill example: distinct 12-byte keys, 100-byte
# values by default, past capacity, then every key read back), at 64 MiB and 256 MiB, with CAS
# on (both servers' default) and off (`use_cas=false`; memcached `-C`); and each server's
# resident set after the fill (VmRSS) against the cache size.
#
#   benches/store_density.sh [VALUE_BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
value=${1:-100}
cargo build --release --locked -p mcb-host -p mcb-bucket-engine
cargo build --release --locked -p mcb-benches --example fill
fill=$root/target/release/examples/fill
memcached=$(command -v memcached || echo /usr/bin/memcached)

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss_mib() { awk '/VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }

printf '%-8s %-6s %10s %10s %6s %9s %9s\n' cache cas mc_kept mcb_kept ratio mc_rss mcb_rss
for mib in 64 256; do
    keys=$((mib * 12000))
    for cas in true false; do
        port=$(free_port)
        mc_flags=()
        [ "$cas" = false ] && mc_flags=(-C)
        "$memcached" -u "$(id -un)" -l 127.0.0.1 -p "$port" -t 2 -m "$mib" "${mc_flags[@]}" &
        pids+=($!)
        mc=$!
        sleep 0.3
        mc_line=$("$fill" --port "$port" --keys "$keys" --value "$value")
        mc_rss=$(rss_mib "$mc")
        kill "$mc"
        out=$(mktemp)
        "$root/target/release/mcb-memcached" -p 0 -t 2 \
            -e "engine=builtin;default=true;default_bucket_config=cache_size\\=${mib}m\\;use_cas\\=$cas" \
            >"$out" &
        pids+=($!)
        mcb=$!
        for _ in $(seq 100); do
            port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$out")
            [ -n "$port" ] && break
            sleep 0.05
        done
        mcb_line=$("$fill" --port "$port" --keys "$keys" --value "$value")
        mcb_rss=$(rss_mib "$mcb")
        kill "$mcb"
        rm -f "$out"
        a=$(echo "$mc_line" | field kept)
        b=$(echo "$mcb_line" | field kept)
        printf '%-8s %-6s %10d %10d %6.2f %8sM %8sM\n' "${mib}MiB" "$cas" "$a" "$b" \
            "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')" "$mc_rss" "$mcb_rss"
        echo "  memcached: $mc_line" >&2
        echo "  mcb:       $mcb_line" >&2
    done
done
