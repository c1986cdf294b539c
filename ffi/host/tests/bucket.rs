//! The main job: mcb-memcached serving libbucket_engine.so, whose buckets run the C test engine
//! (loaded by path): SASL users land in their own buckets, the admin creates, lists, selects and
//! deletes buckets over the wire, and deleting a bucket under load loses nothing elsewhere.

mod common;
use common::*;
use std::path::PathBuf;

struct Fixture {
    server: Server,
    engine: String,
    _dir: TempDir,
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(extra_config: &str) -> Fixture {
    // One directory per fixture: tests run in parallel, and each removes its own on drop.
    static FIXTURES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    // Relaxed: only the numbers must differ; nothing is published with them.
    let n = FIXTURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mcb-host-bucket-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pwdb = dir.join("isasl.pw");
    std::fs::write(&pwdb, "admin adminpw\nalice apw\nbob bpw\ncarol cpw\n").unwrap();
    let engine = test_engine().to_str().unwrap().to_owned();
    let config = format!("engine={engine};default=true;admin=admin{extra_config}");
    let bucket = bucket_engine();
    let server = Server::start_env(
        &["-E", bucket.to_str().unwrap(), "-e", &config],
        &[("MEMCACHED_SASL_PWDB", pwdb.to_str().unwrap())],
    );
    Fixture {
        server,
        engine,
        _dir: TempDir(dir),
    }
}

fn login(f: &Fixture, user: &str, password: &str) -> Bin {
    let mut c = f.server.binary();
    let r = c.auth(user, password);
    assert_eq!(r.status, SUCCESS, "{user} logs in: {r:?}");
    c
}

fn create(admin: &mut Bin, f: &Fixture, name: &str) -> Resp {
    let spec = format!("{}\0cache_size=1m", f.engine);
    admin.call(CREATE_BUCKET, &[], name.as_bytes(), spec.as_bytes(), 0)
}

fn list(admin: &mut Bin) -> Vec<String> {
    let r = admin.call(LIST_BUCKETS, &[], &[], &[], 0);
    assert_eq!(r.status, SUCCESS, "{r:?}");
    let mut names: Vec<String> = String::from_utf8(r.value)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

#[test]
fn the_default_bucket_serves_both_protocols() {
    let f = start("");
    let mut c = f.server.binary();
    assert_eq!(c.set(b"k", b"v", 7).status, SUCCESS);
    let mut a = f.server.ascii();
    assert_eq!(a.cmd("get k\r\n"), "VALUE k 7 1");
    assert_eq!(a.line(), "v");
    assert_eq!(a.line(), "END");
}

#[test]
fn users_see_only_their_own_buckets() {
    let f = start(";auto_create=false");
    let mut admin = login(&f, "admin", "adminpw");
    assert_eq!(create(&mut admin, &f, "alice").status, SUCCESS);
    assert_eq!(create(&mut admin, &f, "bob").status, SUCCESS);
    assert_eq!(create(&mut admin, &f, "bob").status, KEY_EEXISTS);
    assert_eq!(list(&mut admin), ["alice", "bob"]);

    let mut alice = login(&f, "alice", "apw");
    let mut bob = login(&f, "bob", "bpw");
    let mut anonymous = f.server.binary();
    assert_eq!(alice.set(b"k", b"alice's", 0).status, SUCCESS);
    assert_eq!(bob.get(b"k").status, KEY_ENOENT);
    assert_eq!(bob.set(b"k", b"bob's", 0).status, SUCCESS);
    assert_eq!(
        anonymous.get(b"k").status,
        KEY_ENOENT,
        "the default bucket is apart"
    );
    assert_eq!(alice.get(b"k").value, b"alice's");
    assert_eq!(bob.get(b"k").value, b"bob's");
    assert_eq!(login(&f, "alice", "apw").get(b"k").value, b"alice's");
    assert_eq!(alice.auth("alice", "nope").status, AUTH_ERROR);
    // (A failed step loses the identity: log in again.)
    let mut alice = login(&f, "alice", "apw");

    // Only the admin may run admin commands.
    assert_eq!(create(&mut alice, &f, "mine").status, UNKNOWN_COMMAND);

    // SELECT moves the admin's connection.
    let r = admin.call(SELECT_BUCKET, &[], b"bob", &[], 0);
    assert_eq!(r.status, SUCCESS, "{r:?}");
    assert_eq!(admin.get(b"k").value, b"bob's");
    assert_eq!(
        admin.call(SELECT_BUCKET, &[], b"nosuch", &[], 0).status,
        KEY_ENOENT
    );

    // DELETE (EWOULDBLOCK inside, completed by the bucket engine's notify_io_complete).
    let r = admin.call(DELETE_BUCKET, &[], b"bob", &[], 0);
    assert_eq!(r.status, SUCCESS, "{r:?}");
    assert_eq!(list(&mut admin), ["alice"]);
    assert_eq!(
        admin.call(DELETE_BUCKET, &[], b"bob", &[], 0).status,
        KEY_ENOENT
    );
    assert_eq!(alice.get(b"k").value, b"alice's");
}

#[test]
fn auto_created_buckets_are_private_too() {
    let f = start("");
    let mut carol = login(&f, "carol", "cpw");
    let mut alice = login(&f, "alice", "apw");
    assert_eq!(carol.set(b"k", b"carol's", 0).status, SUCCESS);
    assert_eq!(alice.get(b"k").status, KEY_ENOENT);
    let mut admin = login(&f, "admin", "adminpw");
    let names = list(&mut admin);
    assert!(names.contains(&"carol".to_owned()), "{names:?}");
}

#[test]
fn deleting_a_bucket_under_load_loses_nothing_elsewhere() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    let f = start(";auto_create=false");
    let mut admin = login(&f, "admin", "adminpw");
    for name in ["alice", "bob", "carol"] {
        assert_eq!(create(&mut admin, &f, name).status, SUCCESS);
    }
    // Each writer stores keys from before the delete until AFTER more after it returned, so
    // the delete lands while all three write, whatever the scheduling.
    const AFTER: u32 = 100;
    let deleted = Arc::new(AtomicBool::new(false));
    let (writing, started) = mpsc::channel();
    let writers: Vec<_> = ["alice", "bob", "carol"]
        .into_iter()
        .map(|user| {
            let mut c = login(&f, user, &format!("{}pw", &user[..1]));
            let (deleted, writing) = (Arc::clone(&deleted), writing.clone());
            std::thread::spawn(move || {
                let (mut stored, mut after) = (0u32, 0);
                while after < AFTER {
                    // Relaxed: a stop signal; nothing is published with it.
                    if deleted.load(Ordering::Relaxed) {
                        after += 1;
                    }
                    let key = format!("{user}-{stored}");
                    let extras = [stored.to_be_bytes(), 0u32.to_be_bytes()].concat();
                    c.send(&packet(SET, &extras, key.as_bytes(), key.as_bytes(), 0));
                    match c.try_recv() {
                        Some(r) if r.status == SUCCESS => stored += 1,
                        // The doomed bucket's writer may see errors (or a closed connection).
                        _ if user == "bob" => break,
                        r => panic!("{user}: set {key} failed: {r:?}"),
                    }
                    if stored == 1 {
                        writing.send(()).expect("the test waits");
                    }
                }
                (user, stored, c)
            })
        })
        .collect();
    for _ in 0..3 {
        started.recv_timeout(TIMEOUT).expect("every writer stores");
    }
    let r = admin.call(DELETE_BUCKET, &[], b"bob", b"force=true", 0);
    assert_eq!(r.status, SUCCESS, "{r:?}");
    // Relaxed: as in the writers.
    deleted.store(true, Ordering::Relaxed);
    for w in writers {
        let (user, stored, mut c) = w.join().expect("writer");
        if user == "bob" {
            continue;
        }
        assert!(stored >= AFTER, "{user}: {stored}");
        for i in 0..stored {
            let key = format!("{user}-{i}");
            let r = c.get(key.as_bytes());
            assert_eq!((r.status, r.value), (SUCCESS, key.into_bytes()));
        }
    }
    assert_eq!(list(&mut admin), ["alice", "carol"]);
}

fn stat(c: &mut Bin, name: &str) -> Option<String> {
    let stats = c.stats(b"");
    stats.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

#[test]
fn tenants_see_and_reset_only_their_own_counters() {
    let f = start("");
    let mut alice = login(&f, "alice", "apw");
    let mut bob = login(&f, "bob", "bpw");
    let mut admin = login(&f, "admin", "adminpw");
    assert_eq!(alice.set(b"k", b"v", 0).status, SUCCESS);
    for _ in 0..3 {
        assert_eq!(alice.get(b"k").status, SUCCESS);
    }
    assert_eq!(bob.get(b"k").status, KEY_ENOENT);
    assert_eq!(stat(&mut alice, "cmd_get").as_deref(), Some("3"));
    assert_eq!(stat(&mut alice, "get_hits").as_deref(), Some("3"));
    assert_eq!(stat(&mut bob, "cmd_get").as_deref(), Some("1"));
    assert_eq!(stat(&mut bob, "get_misses").as_deref(), Some("1"));
    assert_eq!(stat(&mut admin, "cmd_get").as_deref(), Some("4"));
    // Server-wide connection counts are the admin's to see.
    assert_eq!(stat(&mut alice, "curr_connections"), None);
    assert!(stat(&mut admin, "curr_connections").is_some());

    // A tenant's reset is its own.
    alice.stats(b"reset");
    assert_eq!(stat(&mut alice, "cmd_get").as_deref(), Some("0"));
    assert_eq!(stat(&mut bob, "cmd_get").as_deref(), Some("1"));
    assert_eq!(stat(&mut admin, "cmd_get").as_deref(), Some("4"));
    // The admin's resets the server's, not the tenants'.
    admin.stats(b"reset");
    assert_eq!(stat(&mut admin, "cmd_get").as_deref(), Some("0"));
    assert_eq!(stat(&mut bob, "cmd_get").as_deref(), Some("1"));
}

#[test]
fn a_failed_auth_step_loses_the_identity_without_dash_s_too() {
    let f = start("");
    let mut bob = login(&f, "bob", "bpw");
    assert_eq!(bob.set(b"k", b"bob's", 0).status, SUCCESS);
    // Failing as alice: no longer bob, and not served until it authenticates again.
    assert_eq!(bob.auth("alice", "wrong").status, AUTH_ERROR);
    assert_eq!(bob.get(b"k").status, AUTH_ERROR);
    // ... and closed, as memcached closes a connection unauthenticated.
    assert!(bob.try_recv().is_none());
    let mut bob = login(&f, "bob", "bpw");
    assert_eq!(bob.get(b"k").value, b"bob's");
    // A connection that never authenticated is served as before (the default bucket).
    assert_eq!(f.server.binary().get(b"k").status, KEY_ENOENT);
}
