"""The meta-memcache client (PyPI) against mcb-memcached on the built-in engine: its plain calls
and its stampede control, with processes racing for one key. Run by meta_client.sh.

Usage: meta_client.py PORT
"""

import multiprocessing as mp
import sys

from meta_memcache import (
    CacheClient,
    RecachePolicy,
    ServerAddress,
    StalePolicy,
    connection_pool_factory_builder,
)

PORT = int(sys.argv[1])
RACERS = 6


def client():
    return CacheClient.cache_client_from_servers(
        servers=[ServerAddress(host="127.0.0.1", port=PORT)],
        connection_pool_factory_fn=connection_pool_factory_builder(
            connection_timeout=5, recv_timeout=5
        ),
    )


def race(barrier, results, key, recache_ttl):
    """One racer: waits for the others, then fetches key once."""
    c = client()
    policy = RecachePolicy(ttl=recache_ttl) if recache_ttl else None
    barrier.wait(timeout=30)
    results.put(c.get(key, recache_policy=policy))


def racing(key, recache_ttl=None):
    """RACERS processes fetch key at once; what each got."""
    barrier = mp.Barrier(RACERS)
    results = mp.Queue()
    procs = [
        mp.Process(target=race, args=(barrier, results, key, recache_ttl))
        for _ in range(RACERS)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0, p.exitcode
    return got


def main():
    c = client()
    print("== meta-memcache: set/get/delete/touch/arithmetic")
    assert c.set("k", "v1", ttl=60)
    assert c.get("k") == "v1"
    value, cas = c.get_cas("k")
    assert value == "v1" and cas
    assert c.set("k", "v2", ttl=60, cas_token=cas)
    assert not c.set("k", "v3", ttl=60, cas_token=cas), "a stale CAS was accepted"
    assert c.get("k") == "v2"
    assert c.touch("k", 120)
    assert not c.touch("nope", 120)
    assert c.delete("k")
    assert c.get("k") is None
    assert not c.delete("k")
    assert c.delta_initialize_and_get("n", 5, initial_value=10, initial_ttl=60) == 10
    assert c.delta_and_get("n", 5) == 15
    assert c.delta("n", -3)
    assert c.delta_and_get("n", 0) == 12
    assert c.delta_and_get("missing", 1) is None
    print("ok")

    print("== meta-memcache: stale-while-revalidate after an invalidation")
    assert c.set("hot", "old", ttl=300)
    stale = StalePolicy(mark_stale_on_deletion_ttl=30)
    assert c.delete("hot", stale_policy=stale)
    got = racing("hot")
    print("racers got:", got)
    assert got.count(None) == 1, "not exactly one winner of the recache"
    assert got.count("old") == RACERS - 1, "the others were not served the stale value"
    assert c.get("hot") == "old", "a fetch after the race won again"
    assert c.set("hot", "new", ttl=300)
    assert c.get("hot") == "new"
    print("ok")

    print("== meta-memcache: early recache below a TTL")
    assert c.set("warm", "w", ttl=20)
    got = racing("warm", recache_ttl=60)
    print("racers got:", got)
    assert got.count(None) == 1, "not exactly one winner of the recache"
    assert got.count("w") == RACERS - 1
    print("ok")
    print("meta-memcache: ok")


if __name__ == "__main__":
    main()
