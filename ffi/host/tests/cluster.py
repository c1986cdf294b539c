"""Three mcb-memcached nodes behind twemproxy (nutcracker: ketama, host ejection), then the same
three through pymemcache's consistent-hashing HashClient. Run by cluster.sh; loopback only,
every wait bounded.

Usage: cluster.py HOST_BINARY NUTCRACKER_BINARY WORKDIR
"""

import os
import re
import socket
import subprocess
import sys
import time

from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient
from pymemcache.exceptions import MemcacheError

HOST, NUTCRACKER, WORK = sys.argv[1:4]
KEYS = [f"key:{i}" for i in range(10_000)]
DEADLINE = 20.0  # seconds any one wait may take
procs = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(port=0):
    """Starts mcb-memcached (the default: built-in engine) and returns (process, port)."""
    p = subprocess.Popen([HOST, "-p", str(port), "-t", "2"], stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline()  # "mcb-memcached listening on 127.0.0.1:PORT"
    m = re.search(r":(\d+)$", line.strip())
    assert m, f"node did not start: {line!r}"
    return p, int(m.group(1))


def wait_until(what, ok):
    deadline = time.monotonic() + DEADLINE
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def curr_items(port):
    c = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
    stats = c.stats()
    c.close()
    return int(stats[b"curr_items"])


def flush(ports):
    for port in ports:
        c = Client(("127.0.0.1", port), connect_timeout=5, timeout=5)
        c.flush_all(noreply=False)
        c.close()


def store_spread(client, ports):
    """Stores every key through client; each node holds some, and the sum is exact."""
    for k in KEYS:
        assert client.set(k, k.encode(), noreply=False), k
    counts = [curr_items(p) for p in ports]
    print("curr_items per node:", counts)
    assert all(n > 0 for n in counts), counts
    assert sum(counts) == len(KEYS), counts


def holder(ports, key):
    """The node holding key, asked directly."""
    found = [p for p in ports if Client(("127.0.0.1", p), timeout=5).get(key) is not None]
    assert len(found) == 1, f"{key} held by {found}"
    return found[0]


def main():
    nodes = [start_node() for _ in range(3)]
    ports = [port for _, port in nodes]
    proxy_port = free_port()
    conf = os.path.join(WORK, "nutcracker.yml")
    with open(conf, "w") as f:
        f.write(
            "cluster:\n"
            f"  listen: 127.0.0.1:{proxy_port}\n"
            "  hash: fnv1a_64\n"
            "  distribution: ketama\n"
            "  auto_eject_hosts: true\n"
            "  server_retry_timeout: 1000\n"
            "  server_failure_limit: 1\n"
            "  timeout: 1000\n"
            "  servers:\n"
            + "".join(f"    - 127.0.0.1:{p}:1 node{i}\n" for i, p in enumerate(ports))
        )
    proxy = subprocess.Popen(
        [NUTCRACKER, "-c", conf, "-s", str(free_port()), "-a", "127.0.0.1",
         "-o", os.path.join(WORK, "nutcracker.log"), "-p", os.path.join(WORK, "nutcracker.pid")]
    )
    procs.append(proxy)

    def proxy_client():
        return Client(("127.0.0.1", proxy_port), connect_timeout=2, timeout=2)

    def proxy_up():
        try:
            socket.create_connection(("127.0.0.1", proxy_port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_until("nutcracker to listen", proxy_up)

    print("== nutcracker: 10,000 keys over three nodes (ketama)")
    store_spread(proxy_client(), ports)

    # Which node holds each key, asked directly (a sample of each node's keys is enough).
    sample = KEYS[:600]
    where = {k: holder(ports, k) for k in sample}
    victim_proc, victim = nodes[1]
    dead_keys = [k for k in sample if where[k] == victim]
    live_keys = [k for k in sample if where[k] != victim]
    assert dead_keys and live_keys

    print("== nutcracker: node", victim, "killed")
    victim_proc.kill()
    victim_proc.wait()
    c = proxy_client()

    def dead_key_is_a_miss():
        # Before ejection the proxy answers an error for the dead node's keys; once the node
        # is ejected, its keys hash to the other two, where they are misses.
        try:
            return proxy_client().get(dead_keys[0]) is None
        except (OSError, MemcacheError):
            return False

    wait_until("the dead node's ejection", dead_key_is_a_miss)
    for k in live_keys:
        assert c.get(k) == k.encode(), f"{k} lost from a live node"
    print(f"ejected; {len(live_keys)} keys of the two live nodes all served")

    print("== nutcracker: node restarted on port", victim)
    restarted, _ = start_node(victim)
    assert curr_items(victim) == 0

    def rejoined():
        # After server_retry_timeout the proxy tries the node again and routes its keys back.
        try:
            proxy_client().set(dead_keys[0], b"back", noreply=False)
        except (OSError, MemcacheError):
            return False
        return Client(("127.0.0.1", victim), timeout=5).get(dead_keys[0]) == b"back"

    wait_until("the restarted node to rejoin", rejoined)
    assert proxy_client().get(dead_keys[0]) == b"back"
    for k in live_keys:
        assert proxy_client().get(k) == k.encode(), k
    print("rejoined: its keys are routed to it again, the others' keys unchanged")
    proxy.terminate()
    proxy.wait()

    print("== pymemcache HashClient: the same three nodes, client-side consistent hashing")
    flush(ports)
    h = HashClient([("127.0.0.1", p) for p in ports], connect_timeout=5, timeout=5)
    store_spread(h, ports)
    got = h.get_many(KEYS)
    assert len(got) == len(KEYS) and all(got[k] == k.encode() for k in KEYS)
    print("all 10,000 keys read back")
    print("cluster: ok")


try:
    main()
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
