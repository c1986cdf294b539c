#!/usr/bin/env bash
# real_clients.sh: mcb-memcached against real memcached clients, on loopback only, every step
# under a timeout. Not run by `cargo test`; .ci/run calls it.
#
#  1. memccapable (Debian's libmemcached-tools; upstream calls it memcapable), binary and ASCII,
#     against Debian's memcached and against mcb-memcached on the same machine: every test that
#     passes against memcached must pass against us. Our host runs four times: the C test engine
#     loaded directly, libbucket_engine.so with the test engine as the default bucket, the
#     default (libbucket_engine.so with the built-in engine as the default bucket), and the
#     built-in engine's own library (libmcb_engine.so) loaded directly.
#     The default runs with -t 4 (the default), -t 1 and -t 8.
#  2. pymemcache (ASCII) against the default bucket, with -t 4, 1 and 8.
#  3. python-binary-memcached (binary, SASL PLAIN), with -t 4, 1 and 8: several users each
#     see only their own bucket; the admin creates, lists, selects and deletes buckets over the wire; deleting a
#     bucket while other connections write to theirs loses nothing in the other buckets.
#
# Needs: cargo, make, cc, python3; installs (when missing, as root) Debian's memcached and
# libmemcached-tools and PyPI's pymemcache and python-binary-memcached.
# MCB_PROFILE=debug reuses a debug build instead of building --release.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
profile=${MCB_PROFILE:-release}
step_timeout=${MCB_STEP_TIMEOUT:-120}

need=()
command -v memccapable >/dev/null || need+=(libmemcached-tools)
command -v memcached >/dev/null || [ -x /usr/bin/memcached ] || need+=(memcached)
if [ ${#need[@]} -gt 0 ]; then
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! python3 -c 'import pymemcache, bmemcached' 2>/dev/null; then
    timeout 300 python3 -m pip install -q 'pymemcache==4.0.0' 'python-binary-memcached==0.33.0'
fi

echo "== build ($profile)"
if [ "$profile" = release ]; then
    cargo build --release --locked -p mcb-host -p mcb-bucket-engine -p mcb-storage-engine
else
    cargo build --locked -p mcb-host -p mcb-bucket-engine -p mcb-storage-engine
fi
make -s -C examples-c/engine all
host=$root/target/$profile/mcb-memcached
bucket=$root/target/$profile/libbucket_engine.so
engine=$(readlink -f examples-c/build/engine-v2.5.1/libtest_engine.so)

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# Starts mcb-memcached (on a free port) with the given arguments; sets $port.
start_host() {
    local log=$work/host$((${#pids[@]})).out
    : >"$log"
    "$host" -p 0 "$@" >"$log" 2>"$log.err" &
    pids+=($!)
    for _ in $(seq 100); do
        port=$(sed -n 's/^mcb-memcached listening on .*:\([0-9]*\)$/\1/p' "$log")
        [ -n "$port" ] && return 0
        sleep 0.05
    done
    echo "mcb-memcached did not start:"; cat "$log.err"; exit 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Runs memccapable against a port; prints the names of the tests that passed, one a line.
capable() {
    timeout "$step_timeout" memccapable -t 5 -h 127.0.0.1 -p "$1" 2>&1 \
        | sed -n 's/^\(.*[^ ]\) *\[pass\]$/\1/p' | sort || true
}

echo "== memccapable: Debian's memcached"
mc_port=$(free_port)
memcached_bin=$(command -v memcached || echo /usr/bin/memcached)
"$memcached_bin" -u "$(id -un)" -l 127.0.0.1 -p "$mc_port" -U 0 -m 64 &
pids+=($!)
# Wait until it accepts connections (bounded), not a fixed time: a slow start would otherwise
# shrink the baseline that mcb-memcached is compared against.
for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$mc_port") 2>/dev/null && break
    sleep 0.05
done
(exec 3<>"/dev/tcp/127.0.0.1/$mc_port") 2>/dev/null || { echo "memcached did not start"; exit 1; }
capable "$mc_port" >"$work/memcached.pass"
echo "$(wc -l <"$work/memcached.pass") tests pass against memcached $("$memcached_bin" -V)"

compare() {
    local name=$1 port=$2
    capable "$port" >"$work/$name.pass"
    local missing
    missing=$(comm -23 "$work/memcached.pass" "$work/$name.pass")
    echo "$(wc -l <"$work/$name.pass") tests pass against mcb-memcached ($name)"
    if [ -n "$missing" ]; then
        echo "FAIL: these pass against memcached but not against mcb-memcached ($name):"
        echo "$missing"
        exit 1
    fi
}

echo "== memccapable: mcb-memcached, the C test engine loaded directly"
start_host -E "$engine"
compare test-engine "$port"

echo "== memccapable: mcb-memcached, libbucket_engine.so (default bucket: the test engine)"
start_host -E "$bucket" -e "engine=$engine;default=true"
compare bucket-engine "$port"

for threads in 4 1 8; do
    echo "== memccapable: mcb-memcached as the README runs it (default bucket: engine=builtin), -t $threads"
    start_host -t "$threads"
    compare "builtin-t$threads" "$port"
done

echo "== memccapable: mcb-memcached, the built-in storage engine loaded directly"
start_host -E "$root/target/$profile/libmcb_engine.so"
compare storage-engine "$port"

# pymemcache (ASCII) against the default bucket on port $1.
pymemcache_checks() {
timeout "$step_timeout" python3 - "$1" <<'EOF'
import sys
from pymemcache.client.base import Client

c = Client(("127.0.0.1", int(sys.argv[1])), connect_timeout=5, timeout=5)
assert c.version()
assert c.set("k", b"v1", expire=0)
assert c.get("k") == b"v1"
value, cas = c.gets("k")
assert value == b"v1"
assert c.cas("k", b"v2", cas) is True
assert c.cas("k", b"v3", cas) is False
assert c.add("k", b"x", noreply=False) is False
assert c.replace("k", b"v4", noreply=False) is True
assert c.append("k", b"!", noreply=False) and c.prepend("k", b"<", noreply=False)
assert c.get("k") == b"<v4!"
assert c.set("n", b"10")
assert c.incr("n", 5) == 15 and c.decr("n", 20) == 0
# A decr that shortens the number keeps its length with spaces, as memcached 1.6 does.
assert c.get_many(["k", "n", "missing"]) == {"k": b"<v4!", "n": b"0 "}
assert c.delete("k", noreply=False) is True and c.get("k") is None
stats = c.stats()
assert b"curr_items" in stats or "curr_items" in stats, stats
assert c.flush_all(noreply=False) and c.get("n") is None
big = b"x" * 100000
assert c.set("big", big) and c.get("big") == big
print("pymemcache: all checks passed")
EOF
}

for threads in 4 1 8; do
    echo "== pymemcache (ASCII) against the default bucket, -t $threads"
    start_host -t "$threads"
    pymemcache_checks "$port"
done

pw=$work/isasl.pw
printf 'admin adminpw\nalice alicepw\nbob bobpw\ncarol carolpw\n' >"$pw"
# python-binary-memcached (SASL) and the bucket admin commands against port $1.
bmemcached_checks() {
timeout "$step_timeout" python3 - "$1" "$engine" <<'EOF'
import socket, struct, sys, threading
import bmemcached
import bmemcached.exceptions

port, engine = int(sys.argv[1]), sys.argv[2]
server = "127.0.0.1:%d" % port


class Admin:
    """A raw binary-protocol connection for the bucket admin opcodes."""

    def __init__(self, user, password):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        status, _ = self.call(0x21, b"PLAIN", b"\0%s\0%s" % (user.encode(), password.encode()))
        assert status == 0, "admin login failed: %#x" % status

    def call(self, opcode, key=b"", value=b""):
        body = key + value
        self.s.sendall(struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), 0, 0, 0, len(body), 7, 0) + body)
        header = self._read(24)
        _, op, keylen, extlen, _, status, bodylen, _, _ = struct.unpack(">BBHBBHIIQ", header)
        assert op == opcode, (op, opcode)
        payload = self._read(bodylen)
        return status, payload[extlen + keylen:]

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.s.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data


admin = Admin("admin", "adminpw")
for name in ("alice", "bob", "carol"):
    status, msg = admin.call(0x85, name.encode(), engine.encode() + b"\0cache_size=16m")
    assert status == 0, (name, status, msg)
status, names = admin.call(0x87)
assert status == 0 and sorted(names.split()) == [b"alice", b"bob", b"carol"], names

users = {u: bmemcached.Client((server,), u, u + "pw", socket_timeout=10) for u in ("alice", "bob", "carol")}
for user, client in users.items():
    assert client.set("whoami", user), user
for user, client in users.items():
    assert client.get("whoami") == user, (user, client.get("whoami"))
try:
    bmemcached.Client((server,), "alice", "wrongpw", socket_timeout=10).get("whoami")
    raise AssertionError("a wrong password was accepted")
except bmemcached.exceptions.MemcachedException as e:
    assert e.code == 0x20, e

# SELECT moves the admin's own connection into a bucket.
status, _ = admin.call(0x89, b"carol")
assert status == 0
status, value = admin.call(0x00, b"whoami")
assert status == 0 and value == b"carol", (status, value)

# DELETE bob while alice and carol write: nothing of theirs is lost.
errors = []

def writer(user):
    client = bmemcached.Client((server,), user, user + "pw", socket_timeout=10)
    try:
        for i in range(500):
            assert client.set("%s-%d" % (user, i), "%s-%d" % (user, i)), i
    except Exception as e:  # reported below
        errors.append((user, e))

threads = [threading.Thread(target=writer, args=(u,)) for u in ("alice", "carol")]
for t in threads:
    t.start()
status, msg = admin.call(0x86, b"bob", b"force=true")
assert status == 0, (status, msg)
for t in threads:
    t.join(60)
assert not errors, errors
for user in ("alice", "carol"):
    client = users[user]
    for i in range(500):
        key = "%s-%d" % (user, i)
        assert client.get(key) == key, key
status, names = admin.call(0x87)
assert sorted(names.split()) == [b"alice", b"carol"], names
print("python-binary-memcached: all checks passed")
EOF
}

for threads in 4 1 8; do
    echo "== python-binary-memcached (SASL) and the bucket admin commands, -t $threads"
    start_host -t "$threads" -E "$bucket" \
        -e "engine=$engine;default=true;admin=admin;auto_create=false" --sasl-pwdb "$pw"
    bmemcached_checks "$port"
done
echo "== real clients: all passed"
