//! proptest: random sequences of create, delete, connect, auth, select, call, reserve, release
//! and disconnect against a sequential model of the seed's rules, checking every answer and
//! every live bucket's reference count after each step.

#![cfg(not(mcb_loom))] // real threads; the loom build runs tests/bucket.rs

use mcb_core::bucket::{
    Config, Connection, CreateError, DeleteError, Fate, Registry, ReserveError,
};
use mcb_model_tests::fixtures::{TestEngine, TestEnv};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// Buckets are told apart by generation, not name: a name can be deleted and created again.
type Id = usize;
const DEFAULT: Id = 0;

#[derive(Clone, Debug)]
enum Op {
    Create(usize),
    Delete(usize),
    Connect,
    Auth(usize, usize),
    Select(usize, usize),
    Call(usize),
    Reserve(usize),
    Release(usize),
    Disconnect(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let conn = 0..6usize;
    prop_oneof![
        name.clone().prop_map(Op::Create),
        name.clone().prop_map(Op::Delete),
        Just(Op::Connect),
        (conn.clone(), name.clone()).prop_map(|(c, n)| Op::Auth(c, n)),
        (conn.clone(), name).prop_map(|(c, n)| Op::Select(c, n)),
        conn.clone().prop_map(Op::Call),
        conn.clone().prop_map(Op::Reserve),
        conn.clone().prop_map(Op::Release),
        conn.prop_map(Op::Disconnect),
    ]
}

/// The model of one connection: attached bucket name, reservations (and the bucket they hold),
/// whether the host still has it open.
#[derive(Debug)]
struct ModelConn {
    bucket: Option<Id>,
    reservations: u32,
    connected: bool,
}

impl ModelConn {
    fn target(&self) -> Id {
        self.bucket.unwrap_or(DEFAULT)
    }
}

struct World {
    env: TestEnv,
    registry: Registry<TestEnv>,
    /// Live (RUNNING) buckets in the model, with their names; the default bucket ("") is
    /// always live.
    live: Vec<(&'static str, Id)>,
    next_id: Id,
    model: Vec<ModelConn>,
    real: Vec<Option<Connection<TestEngine>>>,
    next_cookie: u32,
}

impl World {
    fn new() -> Self {
        let env = TestEnv::new();
        let config = Config {
            engine: "test.so".into(),
            default_bucket: true,
            ..Config::default()
        };
        let registry = Registry::new(env.clone(), config).expect("registry");
        Self {
            env,
            registry,
            live: vec![("", DEFAULT)],
            next_id: DEFAULT + 1,
            model: Vec::new(),
            real: Vec::new(),
            next_cookie: 0,
        }
    }

    fn running(&self, id: Id) -> bool {
        self.live.iter().any(|&(_, b)| b == id)
    }

    fn live_named(&self, name: &str) -> Option<Id> {
        self.live
            .iter()
            .find(|&&(n, _)| n == name)
            .map(|&(_, id)| id)
    }

    fn add_live(&mut self, name: &'static str) -> Id {
        let id = self.next_id;
        self.next_id += 1;
        self.live.push((name, id));
        id
    }

    fn wait_notified(&self, cookie: u32) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.env.events().notified().contains(&cookie) {
            assert!(Instant::now() < deadline, "delete never completed");
            std::thread::sleep(Duration::from_micros(200));
        }
        // The worker unlinks before it notifies, so the name is free now.
    }

    /// Index of an open-or-reserved connection chosen by `pick`, if any exists.
    fn conn(&self, pick: usize) -> Option<usize> {
        let alive: Vec<usize> = (0..self.real.len())
            .filter(|&i| self.real[i].is_some())
            .collect();
        (!alive.is_empty()).then(|| alive[pick % alive.len()])
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Create(n) => {
                let name = NAMES[n];
                let got = self.registry.create(name, "test.so", "").map(drop);
                if self.live_named(name).is_some() {
                    assert!(matches!(got, Err(CreateError::Exists(_))), "{got:?}");
                } else {
                    assert_eq!(got, Ok(()));
                    self.add_live(name);
                }
            }
            Op::Delete(n) => {
                let name = NAMES[n];
                let cookie = self.next_cookie;
                self.next_cookie += 1;
                let got = self.registry.delete(name, cookie, false);
                if self.live_named(name).is_some() {
                    assert_eq!(got, Ok(()));
                    self.live.retain(|&(b, _)| b != name);
                    self.wait_notified(cookie);
                } else {
                    assert_eq!(got, Err(DeleteError::NotFound));
                }
            }
            Op::Connect => {
                self.real.push(Some(Connection::connect(&self.registry)));
                self.model.push(ModelConn {
                    bucket: Some(DEFAULT),
                    reservations: 0,
                    connected: true,
                });
            }
            Op::Auth(c, n) | Op::Select(c, n) => {
                let Some(i) = self.conn(c) else { return };
                if !self.model[i].connected {
                    return; // the host does not authenticate closed connections
                }
                let name = NAMES[n];
                let conn = self.real[i].as_mut().expect("alive");
                let reserved = self.model[i].reservations > 0;
                if let Op::Auth(..) = op {
                    let got = conn.authenticate(&self.registry, name, None);
                    if reserved {
                        assert_eq!(got, Err(ReserveError::Reserved));
                        return;
                    }
                    assert_eq!(got, Ok(()));
                    let id = match self.live_named(name) {
                        Some(id) => id,
                        None => self.add_live(name), // auto-created
                    };
                    self.model[i].bucket = Some(id);
                } else {
                    let got = conn.select(&self.registry, name);
                    if reserved {
                        assert_eq!(got, Err(ReserveError::Reserved));
                        return;
                    }
                    let found = self.live_named(name);
                    assert_eq!(got, Ok(found.is_some()));
                    self.model[i].bucket = found;
                }
            }
            Op::Call(c) => {
                let Some(i) = self.conn(c) else { return };
                if !self.model[i].connected {
                    return;
                }
                let conn = self.real[i].as_ref().expect("alive");
                let served = conn
                    .enter(&self.registry)
                    .map(|engine| engine.call())
                    .is_some();
                let target = self.model[i].target();
                assert_eq!(served, self.running(target), "call into bucket #{target}");
            }
            Op::Reserve(c) => {
                let Some(i) = self.conn(c) else { return };
                if !self.model[i].connected {
                    return; // reservations come from engine upcalls on open connections
                }
                let got = self.real[i]
                    .as_ref()
                    .expect("alive")
                    .reserve(&self.registry);
                let target = self.model[i].target();
                if self.running(target) {
                    assert_eq!(got, Ok(()));
                    self.model[i].reservations += 1;
                } else {
                    assert_eq!(got, Err(ReserveError::NotRunning));
                }
            }
            Op::Release(c) => {
                let Some(i) = self.conn(c) else { return };
                let got = self.real[i]
                    .as_ref()
                    .expect("alive")
                    .release(&self.registry);
                let m = &mut self.model[i];
                if m.reservations == 0 {
                    assert_eq!(got, Err(ReserveError::NotReserved));
                    return;
                }
                m.reservations -= 1;
                let free = m.reservations == 0 && !m.connected;
                assert_eq!(got, Ok(if free { Fate::Free } else { Fate::Keep }));
                if free {
                    self.real[i] = None;
                }
            }
            Op::Disconnect(c) => {
                let Some(i) = self.conn(c) else { return };
                if !self.model[i].connected {
                    return; // the host disconnects once
                }
                let cookie = 1000 + i as u32;
                let got = self.real[i]
                    .as_ref()
                    .expect("alive")
                    .disconnect(&self.registry, cookie);
                let m = &mut self.model[i];
                m.connected = false;
                let free = m.reservations == 0;
                assert_eq!(got, if free { Fate::Free } else { Fate::Keep });
                if free {
                    self.real[i] = None;
                }
            }
        }
    }

    /// Every live bucket is found RUNNING with exactly the references the model predicts.
    fn check_references(&self) {
        let mut expected: BTreeMap<Id, usize> = self.live.iter().map(|&(_, b)| (b, 1)).collect();
        for (m, real) in self.model.iter().zip(&self.real) {
            if real.is_none() {
                continue;
            }
            if m.connected {
                if let Some(b) = m.bucket {
                    if let Some(n) = expected.get_mut(&b) {
                        *n += 1;
                    }
                }
            }
            if let Some(n) = expected.get_mut(&m.target()) {
                *n += m.reservations as usize;
            }
        }
        for &(name, id) in &self.live {
            let refs = expected[&id];
            let bucket = if id == DEFAULT {
                self.registry.default_bucket().map(|h| h.refcount())
            } else {
                self.registry.find(name).map(|b| b.refcount() - 1)
            };
            assert_eq!(bucket, Some(refs), "references of bucket {name:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn buckets_follow_the_seed_rules(ops in prop::collection::vec(op(), 1..64)) {
        let mut world = World::new();
        for op in &ops {
            world.step(op);
            world.check_references();
        }
        let World { env, registry, real, .. } = world;
        drop(real); // the host goes away; dropping open connections gives their references back
        registry.destroy();
        prop_assert_eq!(env.events().loaded(), env.events().destroyed(), "every engine destroyed once");
    }
}
