#!/usr/bin/env bash
# bench.sh: mcb-memcached against Debian's memcached on the same machine and the same workload,
# as ratios of operations per second and of p99 latency (ours / theirs), with the loadgen example of benches/
# (a closed loop: each connection waits for its answer). Mixes: get-heavy (90% gets) and
# set-heavy (50%) with 2 and 4 client connections per core; get-heavy with 50, 200 and 1,000
# connections; pipelined multi-gets of 100 keys a request (binary GETKQ x 100 + NOOP); and a
# meta mix (90% `mg <key> v f t`, 10% `ms`, 2 connections per core). Each
# row also gives each server's CPU time per operation (user + system, from /proc/PID/stat,
# over the run). Loopback only; every run is bounded.
#
# Our server runs libbucket_engine.so with the default bucket on MCB_BENCH_ENGINE_CONFIG
# (default: the built-in storage engine, as the README's run command serves it; set it to
# "engine=/abs/path/libtest_engine.so;default=true" to measure the host over the C test engine).
# MCB_BENCH_BUCKET_ENGINE picks another libbucket_engine.so (default: this tree's release build).
# Both servers run with as many worker threads as there are cores (-t).
# MCB_BENCH_SECS (default 5) sets each run's length.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
secs=${MCB_BENCH_SECS:-5}
cores=$(nproc)

command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || {
    echo "bench.sh needs Debian's memcached (apt-get install memcached)"; exit 1; }
cargo build --release --locked -p mcb-host -p mcb-bucket-engine
cargo build --release --locked -p mcb-benches --example loadgen
config=${MCB_BENCH_ENGINE_CONFIG:-engine=builtin;default=true;default_bucket_config=cache_size=512m}
loadgen=$root/target/release/examples/loadgen

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

mc_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$(command -v memcached || echo /usr/bin/memcached)" -u "$(id -un)" -l 127.0.0.1 -p "$mc_port" \
    -t "$cores" -m 512 -U 0 -c 4096 &
pids+=($!)
mc_pid=$!
: >"$work/host.out"
"$root/target/release/mcb-memcached" -p 0 \
    -E "${MCB_BENCH_BUCKET_ENGINE:-$root/target/release/libbucket_engine.so}" \
    -e "$config" -t "$cores" -c 4096 >"$work/host.out" &
pids+=($!)
host_pid=$!
for _ in $(seq 100); do
    host_port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$work/host.out")
    [ -n "$host_port" ] && break
    sleep 0.05
done
[ -n "$host_port" ] || { echo "mcb-memcached did not start"; exit 1; }
sleep 0.2

field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# CPU ticks (user + system) a process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# Microseconds of CPU per operation: ticks used over ops.
us_per_op() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }'; }

# Runs loadgen against port $1 (pid $2) with the rest of the arguments; prints its line with
# cpu_ticks= appended.
measure() {
    local port=$1 pid=$2 before after line
    shift 2
    before=$(ticks "$pid")
    line=$(timeout $((secs + 120)) "$loadgen" --port "$port" --secs "$secs" "$@")
    after=$(ticks "$pid")
    echo "$line cpu_ticks=$((after - before))"
}

printf '%-10s %5s %12s %12s %6s %8s %8s %6s %9s %9s %6s\n' mix conns mc_ops mcb_ops ratio \
    mc_p99us mcb_p99us ratio mc_cpu_us mcb_cpu_us ratio
row() {
    local name=$1 conns=$2 theirs ours
    shift 2
    theirs=$(measure "$mc_port" "$mc_pid" --conns "$conns" "$@")
    ours=$(measure "$host_port" "$host_pid" --conns "$conns" "$@")
    local t_ops o_ops t_p99 o_p99 t_cpu o_cpu
    t_ops=$(field ops_per_sec <<<"$theirs") o_ops=$(field ops_per_sec <<<"$ours")
    t_p99=$(field p99_us <<<"$theirs") o_p99=$(field p99_us <<<"$ours")
    t_cpu=$(us_per_op "$(field cpu_ticks <<<"$theirs")" "$(field ops <<<"$theirs")")
    o_cpu=$(us_per_op "$(field cpu_ticks <<<"$ours")" "$(field ops <<<"$ours")")
    printf '%-10s %5d %12d %12d %6s %8d %8d %6s %9s %9s %6s\n' "$name" "$conns" "$t_ops" "$o_ops" \
        "$(div "$o_ops" "$t_ops")" "$t_p99" "$o_p99" "$(div "$o_p99" "$t_p99")" \
        "$t_cpu" "$o_cpu" "$(div "$o_cpu" "$t_cpu")"
}

for mix in get-heavy:0.9 set-heavy:0.5; do
    name=${mix%%:*} ratio=${mix##*:}
    for per_core in 2 4; do
        row "$name" $((per_core * cores)) --get-ratio "$ratio"
    done
done
for conns in 50 200 1000; do
    row get-heavy "$conns" --get-ratio 0.9
done
row multiget $((2 * cores)) --multi 100
row meta $((2 * cores)) --get-ratio 0.9 --meta 1
echo "(ratio: ours / memcached's; ops higher is better, p99 and CPU per op lower is better)"
