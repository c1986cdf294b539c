#!/usr/bin/env python3
"""differential.py: seeded random ASCII requests (classic and meta commands, bad lines among
them) sent to Debian's memcached and to mcb-memcached side by side, one fresh pair of servers per
seed; prints the first answer that differs in each seed (CAS values masked: each server's own
last CAS stands in for `$CAS` in a request). Every request is followed by `mn`, and its answer is
read up to the `MN`, so quiet and noreply commands cost no timeout.

Not run by `cargo test` or CI: a random sequence may reach one of the differences the host
README lists (the access time, `t` after `flush_all`, padding while another reference holds an
item), and what it found is in tests/meta.rs's transcripts, which CI replays against memcached. Run it after changing the protocol layer:

    cargo build -p mcb-host
    python3 ffi/host/tests/differential.py [first-seed] [seeds] [requests] [mcb-memcached] [stats]

With `stats`, the counters of `stats` (those COUNTERS names) are compared after every request
too (what it found is in tests/meta.rs, `the_counters_count_as_memcacheds`; the host README's
Stats section lists the differences left, which a long run may reach).

Needs python3 and memcached on the PATH (Debian's package: 1.6.18).
"""

import os
import random
import re
import socket
import subprocess
import sys
import time

# The first seven are the usual ones; "YQ==" and "bnVt" are "a" and "num" in base64 (with `b`).
KEYS = ["a", "b", "c", "k1", "num", "YQ==", "bnVt", "x" * 250, "x" * 251, "sp ace"]
VALUES = [b"", b"v", b"12", b"0", b"18446744073709551615", b"abc" * 10, b"-1", b" 5", b"7"]
NUMBERS = ["0", "1", "2", "5", "100", "-1", "4294967295", "4294967296", "2592001", "x", "01"]


def key(r):
    return r.choice(KEYS[:7] + [r.choice(KEYS)])


def flags(r, pool):
    return " ".join(r.sample(pool, r.randint(0, 3)))


def storage(r, verb, k):
    value = r.choice(VALUES)
    length = len(value) if r.random() < 0.9 else r.choice([len(value) + 1, max(len(value) - 1, 0), -1])
    parts = [verb, k, r.choice(NUMBERS) if r.random() < 0.2 else str(r.choice([0, 5, 65535])),
             str(r.choice([0, 0, 100, -1])), str(length)]
    if verb == "cas":
        parts.append(r.choice(["$CAS", "$CAS", "0", "x"]))
    if r.random() < 0.15:
        parts.append("noreply")
    return " ".join(parts).encode() + b"\r\n" + value + b"\r\n"


def meta_get(r, k):
    f = flags(r, ["v", "k", "c", "f", "t", "s", "q", "Oab", "T10", "N5", "R5", "h", "E5", "u",
                  "I", "C0", "b"]).split()
    return ("mg %s %s" % (k, " ".join(f))).strip().encode() + b"\r\n"


def request(r):
    verb = r.choice(["set", "add", "replace", "append", "prepend", "cas", "get", "gets", "gat",
                     "gats", "touch", "delete", "incr", "decr", "mg", "ms", "md", "ma", "me",
                     "verbosity", "flush_all", "bad"])
    k = key(r)
    if verb in ("set", "add", "replace", "append", "prepend", "cas"):
        return storage(r, verb, k)
    if verb in ("get", "gets"):
        return (verb + " " + " ".join(key(r) for _ in range(r.randint(0, 3)))).encode() + b"\r\n"
    if verb in ("gat", "gats"):
        keys = " ".join(key(r) for _ in range(r.randint(0, 2)))
        return ("%s %s %s" % (verb, r.choice(["0", "10", "-1"]), keys)).encode() + b"\r\n"
    if verb == "touch":
        return ("touch %s %s" % (k, r.choice(NUMBERS))).encode() + b"\r\n"
    if verb == "delete":
        return ("delete %s%s" % (k, r.choice(["", " 0", " noreply", " 5", " 0 noreply"]))).encode() + b"\r\n"
    if verb in ("incr", "decr"):
        delta = r.choice(["1", "0", "5", "18446744073709551615", "18446744073709551616", "-1", "x"])
        return ("%s %s %s%s" % (verb, k, delta, r.choice(["", " noreply"]))).encode() + b"\r\n"
    if verb == "mg":
        return meta_get(r, k)
    if verb == "ms":
        value = r.choice(VALUES)
        f = flags(r, ["T0", "T10", "F5", "I", "q", "Oab", "k", "c", "MA", "MP", "MR", "MS", "ME",
                      "MAx", "C$CAS", "C0", "b"])
        return ("ms %s %d %s" % (k, len(value), f)).strip().encode() + b"\r\n" + value + b"\r\n"
    if verb == "md":
        f = flags(r, ["q", "Oab", "k", "I", "T5", "C$CAS", "C0"])
        return ("md %s %s" % (k, f)).strip().encode() + b"\r\n"
    if verb == "ma":
        f = flags(r, ["N5", "J3", "D2", "MI", "MD", "v", "t", "c", "q", "Oab", "k", "MX", "C$CAS",
                      "N0"])
        return ("ma %s %s" % (k, f)).strip().encode() + b"\r\n"
    if verb == "me":
        return ("me %s %s" % (k, r.choice(["", "", "b", "x"]))).strip().encode() + b"\r\n"
    if verb == "verbosity":
        return r.choice([b"verbosity 1\r\n", b"verbosity\r\n", b"verbosity x\r\n"])
    if verb == "flush_all":
        return r.choice([b"flush_all\r\n", b"flush_all 0\r\n", b"flush_all noreply\r\n",
                         b"flush_all x\r\n"])
    return r.choice([b"bogus\r\n", b"\r\n", b"get\r\n", b"set a\r\n", b"GET a\r\n",
                     b"set a 0 0 x\r\nv\r\n"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port):
    for _ in range(200):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            time.sleep(0.02)
    raise SystemExit("no server on port %d" % port)


def ask(conn, data):
    conn.sendall(data + b"mn\r\n")
    out = b""
    while not out.endswith(b"MN\r\n"):
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            return out + b"<timeout>"
        if not chunk:
            return out + b"<closed>"
        out += chunk
    return out[:-4]


def masked(answer):
    # `me`: the CAS, and memcached's slab class and size, which ours leaves out.
    answer = re.sub(rb"( cas=)\d+( fetch=\w+)( cls=\d+ size=\d+)?", rb"\1*\2", answer)
    answer = re.sub(rb"(VALUE \S+ \d+ \d+) \d+", rb"\1 *", answer)
    return re.sub(rb"( c)\d+", rb"\1*", answer)


def last_cas(answer):
    found = re.findall(rb"VALUE \S+ \d+ \d+ (\d+)", answer) or re.findall(rb" c(\d+)", answer)
    return found[-1] if found else None


COUNTERS = [b"cmd_get", b"cmd_set", b"cmd_flush", b"cmd_touch", b"cmd_meta", b"get_hits",
            b"get_misses", b"delete_misses", b"delete_hits", b"incr_misses", b"incr_hits",
            b"decr_misses", b"decr_hits", b"cas_misses", b"cas_hits", b"cas_badval",
            b"touch_hits", b"touch_misses", b"store_too_large", b"store_no_memory",
            b"total_items"]


def counters(conn):
    conn.sendall(b"stats\r\n")
    out = b""
    while not out.endswith(b"END\r\n"):
        out += conn.recv(65536)
    found = dict(re.findall(rb"STAT (\S+) (\S+)", out))
    return {name: found.get(name) for name in COUNTERS}


class Servers:
    """Debian's memcached and ours, each on a free port, with a connection to each (`conns`:
    memcached's first); both stopped when the `with` block ends."""

    def __init__(self, ours):
        ports = (free_port(), free_port())
        user = ["-u", "nobody"] if os.geteuid() == 0 else []
        theirs = ["memcached", "-p", str(ports[0]), "-U", "0", "-l", "127.0.0.1"] + user
        self.processes = [
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for command in (theirs, [ours, "-p", str(ports[1])])
        ]
        self.ports = ports

    def __enter__(self):
        self.conns = [connect(p) for p in self.ports]
        return self

    def __exit__(self, *_):
        for process in self.processes:
            process.kill()
            process.wait()


def run_seed(seed, requests, ours, with_stats=False):
    r = random.Random(seed)
    with Servers(ours) as servers:
        conns = servers.conns
        cas = [b"0", b"0"]
        for step in range(requests):
            req = request(r)
            sent = [req.replace(b"$CAS", c) for c in cas]
            answers = [ask(conn, s) for conn, s in zip(conns, sent)]
            cas = [last_cas(a) or c for a, c in zip(answers, cas)]
            if masked(answers[0]) != masked(answers[1]):
                print("seed %d, request %d: %r\n  memcached %r\n  ours      %r"
                      % (seed, step, sent[0], answers[0], answers[1]))
                return False
            if any(a.endswith((b"<closed>", b"<timeout>")) for a in answers):
                return True
            if with_stats:
                theirs, mine = (counters(conn) for conn in conns)
                if theirs != mine:
                    differing = {k: (theirs[k], mine[k]) for k in COUNTERS if theirs[k] != mine[k]}
                    print("seed %d, request %d: %r\n  counters (memcached, ours) %r"
                          % (seed, step, sent[0], differing))
                    return False
        return True


def main(run_seed=run_seed):
    """Runs `run_seed` over the seeds the command line names; exits 1 if any differed."""
    args = sys.argv[1:]
    first = int(args[0]) if len(args) > 0 else 1
    seeds = int(args[1]) if len(args) > 1 else 50
    requests = int(args[2]) if len(args) > 2 else 100
    ours = args[3] if len(args) > 3 else "target/debug/mcb-memcached"
    with_stats = len(args) > 4 and args[4] == "stats"
    differing = sum(not run_seed(seed, requests, ours, with_stats)
                    for seed in range(first, first + seeds))
    print("%d of %d seeds differ" % (differing, seeds))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
