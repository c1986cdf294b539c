#!/usr/bin/env bash
# bench.sh: mcb-memcached against Debian's memcached on the same machine and the same workload,
# as ratios of operations per second, of p99 latency and of CPU time per operation (ours /
# theirs), with the loadgen example of benches/ (a closed loop: each connection waits for its
# answer). Rows:
#   get-heavy (90% gets) and set-heavy (50%), 100-byte values, 2 and 4 connections per core;
#   get-heavy with 50, 200 and 1,000 connections;
#   multiget: pipelined multi-gets of 100 keys a request (binary GETKQ x 100 + NOOP; each key
#     counts as an operation);
#   meta: 90% `mg <key> v f t`, 10% `ms`, 2 connections per core;
#   set-10k, set-100k, set-1m: SETs only of 10,240, 102,400 and 1,000,000-byte values (1 MB
#     decimal, so that the item fits memcached's default 1 MiB item size), 4 connections over
#     40 keys;
#   direct-get, direct-multiget, direct-meta: the get-heavy (2 per core), multiget and meta rows
#     against a second mcb-memcached that loads the built-in engine's own library
#     (libmcb_engine.so) with no bucket engine in between, to tell the layers apart.
# Each row gives each server's CPU time per operation (user + system, from /proc/PID/stat, over
# the run) and the user-space part of it alone (usr: the rest is the kernel's, which the same
# system calls cost both servers alike). Loopback only; every run is bounded.
#
# Our server runs libbucket_engine.so with the default bucket on MCB_BENCH_ENGINE_CONFIG
# (default: the built-in storage engine, as the README's run command serves it; set it to
# "engine=/abs/path/libtest_engine.so;default=true" to measure the host over the C test engine).
# MCB_BENCH_BUCKET_ENGINE picks another libbucket_engine.so, MCB_BENCH_STORAGE_ENGINE another
# libmcb_engine.so, MCB_BENCH_HOST another mcb-memcached (defaults: this tree's release build). All servers run with as many worker
# threads as there are cores (-t).
# MCB_BENCH_BUILD=0 skips the release build (to measure binaries built before).
# MCB_BENCH_SECS (default 5) sets each run's length; MCB_BENCH_ROWS (a comma-separated list of
# row names, e.g. "multiget,set-1m") runs only those rows; MCB_BENCH_OURS_FIRST=1 measures ours
# before memcached in each row (run the script twice, once each way, on a noisy machine);
# MCB_BENCH_SYSCALLS=1 adds each server's system calls per operation, counted with
# `perf stat -e raw_syscalls:sys_enter` attached over the run (needs perf and the tracepoint).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
secs=${MCB_BENCH_SECS:-5}
cores=$(nproc)
rows=${MCB_BENCH_ROWS:-}
ours_first=${MCB_BENCH_OURS_FIRST:-0}
syscalls=${MCB_BENCH_SYSCALLS:-0}

command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || {
    echo "bench.sh needs Debian's memcached (apt-get install memcached)"; exit 1; }
if [ "${MCB_BENCH_BUILD:-1}" = 1 ]; then
    cargo build --release --locked -p mcb-host -p mcb-bucket-engine -p mcb-storage-engine
    cargo build --release --locked -p mcb-benches --example loadgen
fi
config=${MCB_BENCH_ENGINE_CONFIG:-engine=builtin;default=true;default_bucket_config=cache_size=512m}
loadgen=$root/target/release/examples/loadgen
host=${MCB_BENCH_HOST:-$root/target/release/mcb-memcached}

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

# Starts mcb-memcached with the arguments given; sets started_port and started_pid.
started=0
start_host() {
    started=$((started + 1))
    local out=$work/host.$started.out
    : >"$out"
    "$host" -p 0 -t "$cores" -c 4096 "$@" >"$out" &
    pids+=($!)
    started_pid=$!
    started_port=
    for _ in $(seq 100); do
        started_port=$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$out")
        [ -n "$started_port" ] && break
        sleep 0.05
    done
    [ -n "$started_port" ] || { echo "mcb-memcached $* did not start"; exit 1; }
}
start_host -E "${MCB_BENCH_BUCKET_ENGINE:-$root/target/release/libbucket_engine.so}" -e "$config"
host_port=$started_port host_pid=$started_pid
start_host -E "${MCB_BENCH_STORAGE_ENGINE:-$root/target/release/libmcb_engine.so}" -m 512
direct_port=$started_port direct_pid=$started_pid
sleep 0.2

field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# CPU ticks (user + system) a process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# CPU ticks in user space alone (the kernel's share is the rest).
user_ticks() { awk '{ print $14 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# Microseconds of CPU per operation: ticks used over ops.
us_per_op() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }'; }

# Runs loadgen against port $1 (pid $2) with the rest of the arguments; prints its line with
# cpu_ticks= (and with MCB_BENCH_SYSCALLS, syscalls=) appended.
measure() {
    local port=$1 pid=$2 before after user_before user_after line perf_pid=
    shift 2
    if [ "$syscalls" = 1 ]; then
        perf stat -x, -e raw_syscalls:sys_enter -p "$pid" -o "$work/perf.$pid" &
        perf_pid=$!
        sleep 0.1
    fi
    before=$(ticks "$pid") user_before=$(user_ticks "$pid")
    line=$(timeout $((secs + 120)) "$loadgen" --port "$port" --secs "$secs" "$@")
    after=$(ticks "$pid") user_after=$(user_ticks "$pid")
    line="$line cpu_ticks=$((after - before)) user_ticks=$((user_after - user_before))"
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid"
        wait "$perf_pid" || true
        line="$line syscalls=$(awk -F, '/raw_syscalls/ { print $1 }' "$work/perf.$pid")"
    fi
    echo "$line"
}

printf '%-15s %5s %10s %10s %6s %8s %8s %6s %9s %9s %6s %8s %8s %6s' mix conns mc_ops mcb_ops ratio \
    mc_p99us mcb_p99us ratio mc_cpu_us mcb_cpu_us ratio mc_usr mcb_usr ratio
[ "$syscalls" = 1 ] && printf ' %8s %8s %6s' mc_sys mcb_sys ratio
echo
# row NAME CONNS PORT PID LOADGEN-ARGS...: one row, ours on PORT (process PID).
row() {
    local name=$1 conns=$2 port=$3 pid=$4 theirs ours
    shift 4
    if [ -n "$rows" ] && [[ ",$rows," != *",$name,"* ]]; then
        return
    fi
    if [ "$ours_first" = 1 ]; then
        ours=$(measure "$port" "$pid" --conns "$conns" "$@")
        theirs=$(measure "$mc_port" "$mc_pid" --conns "$conns" "$@")
    else
        theirs=$(measure "$mc_port" "$mc_pid" --conns "$conns" "$@")
        ours=$(measure "$port" "$pid" --conns "$conns" "$@")
    fi
    local t_ops o_ops t_p99 o_p99 t_cpu o_cpu t_usr o_usr t_n o_n
    t_ops=$(field ops_per_sec <<<"$theirs") o_ops=$(field ops_per_sec <<<"$ours")
    t_p99=$(field p99_us <<<"$theirs") o_p99=$(field p99_us <<<"$ours")
    t_n=$(field ops <<<"$theirs") o_n=$(field ops <<<"$ours")
    t_cpu=$(us_per_op "$(field cpu_ticks <<<"$theirs")" "$t_n")
    o_cpu=$(us_per_op "$(field cpu_ticks <<<"$ours")" "$o_n")
    t_usr=$(us_per_op "$(field user_ticks <<<"$theirs")" "$t_n")
    o_usr=$(us_per_op "$(field user_ticks <<<"$ours")" "$o_n")
    printf '%-15s %5d %10d %10d %6s %8d %8d %6s %9s %9s %6s %8s %8s %6s' "$name" "$conns" "$t_ops" \
        "$o_ops" "$(div "$o_ops" "$t_ops")" "$t_p99" "$o_p99" "$(div "$o_p99" "$t_p99")" \
        "$t_cpu" "$o_cpu" "$(div "$o_cpu" "$t_cpu")" "$t_usr" "$o_usr" "$(div "$o_usr" "$t_usr")"
    if [ "$syscalls" = 1 ]; then
        local t_sys o_sys
        t_sys=$(div "$(field syscalls <<<"$theirs")" "$t_n")
        o_sys=$(div "$(field syscalls <<<"$ours")" "$o_n")
        printf ' %8s %8s %6s' "$t_sys" "$o_sys" "$(div "$o_sys" "$t_sys")"
    fi
    echo
}

bucket=("$host_port" "$host_pid")
direct=("$direct_port" "$direct_pid")
for mix in get-heavy:0.9 set-heavy:0.5; do
    name=${mix%%:*} ratio=${mix##*:}
    for per_core in 2 4; do
        row "$name" $((per_core * cores)) "${bucket[@]}" --get-ratio "$ratio"
    done
done
for conns in 50 200 1000; do
    row get-heavy "$conns" "${bucket[@]}" --get-ratio 0.9
done
row multiget $((2 * cores)) "${bucket[@]}" --multi 100
row meta $((2 * cores)) "${bucket[@]}" --get-ratio 0.9 --meta 1
for size in 10k:10240 100k:102400 1m:1000000; do
    row "set-${size%%:*}" 4 "${bucket[@]}" --get-ratio 0 --keys 40 --value "${size##*:}"
done
row direct-get $((2 * cores)) "${direct[@]}" --get-ratio 0.9
row direct-multiget $((2 * cores)) "${direct[@]}" --multi 100
row direct-meta $((2 * cores)) "${direct[@]}" --get-ratio 0.9 --meta 1
echo "(ratio: ours / memcached's; ops higher is better, p99, CPU and system calls per op lower is better)"
