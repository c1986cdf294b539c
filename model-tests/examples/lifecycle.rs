#![cfg_attr(mcb_loom, allow(unused))]
//! The bucket lifecycle end to end, until the engine and its host exist: a registry with a
//! default bucket and three tenants, connections calling from several threads, one tenant
//! deleted under load, then global shutdown. Prints what happened and exits non-zero if any
//! rule was broken.

use mcb_core::bucket::{Config, Connection, Fate, Registry, State};
use mcb_model_tests::fixtures::TestEnv;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const PHASE: Duration = Duration::from_millis(50);

fn main() {
    let env = TestEnv::new();
    let config = Config {
        engine: "test".into(),
        default_bucket: true,
        ..Config::default()
    };
    let registry = Registry::new(env.clone(), config).expect("start the registry");
    for tenant in ["alice", "bob", "carol"] {
        drop(registry.create(tenant, "test", "").expect("create tenant"));
    }
    println!("buckets: {:?}", registry.states());

    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let served: Vec<(String, usize, usize)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (registry, stop) = (&registry, &stop);
                s.spawn(move || {
                    let tenant = ["alice", "bob", "carol", "alice"][t];
                    let mut conn = Connection::connect(registry);
                    conn.authenticate(registry, tenant, None)
                        .expect("not reserved");
                    let (mut ok, mut refused) = (0, 0);
                    // Relaxed: a plain stop signal; the join publishes everything else.
                    while !stop.load(Ordering::Relaxed) {
                        match conn.enter(registry) {
                            Some(engine) => {
                                engine.call();
                                ok += 1;
                            }
                            None => refused += 1,
                        }
                    }
                    assert_eq!(conn.disconnect(registry, t as u32), Fate::Free);
                    (tenant.to_owned(), ok, refused)
                })
            })
            .collect();
        std::thread::sleep(PHASE);
        registry.delete("bob", 99, false).expect("delete bob");
        println!("deleted bob under load");
        std::thread::sleep(PHASE);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let elapsed = started.elapsed();

    let deadline = Instant::now() + Duration::from_secs(10);
    while !env.events().notified().contains(&99) {
        assert!(Instant::now() < deadline, "bob's delete never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
    for (tenant, ok, refused) in &served {
        println!("{tenant:>6}: {ok:>6} calls served, {refused:>6} refused");
        if tenant == "bob" {
            assert!(
                *ok > 0 && *refused > 0,
                "bob served before and was refused after"
            );
        } else {
            assert_eq!(*refused, 0, "{tenant} lost calls while bob was deleted");
        }
    }
    let total: usize = served.iter().map(|(_, ok, _)| ok).sum();
    println!(
        "{total} calls in {elapsed:.2?} ({:.1} M calls/s)",
        total as f64 / elapsed.as_secs_f64() / 1e6
    );
    println!("buckets after delete: {:?}", registry.states());
    assert!(registry.find("bob").is_none());
    assert_eq!(
        registry.find("alice").map(|b| b.state()),
        Some(State::Running)
    );

    registry.destroy();
    let events = env.events();
    println!(
        "shutdown: {} engines loaded, {} destroyed, {} delete notified",
        events.loaded(),
        events.destroyed(),
        events.notified().len()
    );
    assert_eq!(
        events.loaded(),
        events.destroyed(),
        "every engine destroyed exactly once"
    );
    println!("ok");
}
