//! The `stats` groups in memcached 1.6's shape, so that monitoring written for memcached reads
//! them (the Prometheus exporter, munin, `memcached-tool`): memcached's names and order, the
//! host's figures and the engine's merged (the engine's answer is captured first, then renamed
//! where memcached names it otherwise), every group ending as memcached ends it.
//!
//! - `stats`: the host's figures (per tenant: a SASL user sees its own counts, the admin or a
//!   connection without identity the server's, and only they see the connection counts), the
//!   engine's (its bucket's), then the engine's other keys.
//! - `settings`: the host's settings and the engine's (`cache_size` as `maxbytes`, ...).
//! - `items`, `slabs`: the engine's own if it answers them; else, for a store without slab
//!   classes, one class (1) holding every item, with the fields memcached tools read that
//!   mean something here (no invented ages or chunk counts).
//! - `conns`, `detail on|off|dump`, `sizes`, `cachedump`, `extstore`, `reset`; any other group
//!   is the engine's.

#![deny(unsafe_code)]

use crate::api::server_core;
use crate::api::stat as host_stat;
use crate::codec::push_stat;
use crate::conn::State;
use crate::counters::{self, NAMES};
use crate::session::{ok, Peer};
use crate::text::{c_u32, BAD_FORMAT};
use mcb_abi::abi::*;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// How a group's answer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// ASCII `END` (binary: the empty stat).
    List,
    /// ASCII `RESET`.
    Reset,
    /// ASCII `OK`.
    Ok,
    /// Nothing after the stats (memcached's `sizes_enable`), binary: the empty stat.
    Bare,
    /// This line instead (binary: EINVAL).
    Refused(&'static str),
    /// The engine's status for a group it answered.
    Engine(ENGINE_ERROR_CODE),
}

/// memcached 1.6.18's general stats, in its order (those that mean something here).
const GENERAL: &[&str] = &[
    "pid",
    "uptime",
    "time",
    "version",
    "pointer_size",
    "rusage_user",
    "rusage_system",
    "max_connections",
    "curr_connections",
    "total_connections",
    "rejected_connections",
    "connection_structures",
    "cmd_get",
    "cmd_set",
    "cmd_flush",
    "cmd_touch",
    "cmd_meta",
    "get_hits",
    "get_misses",
    "get_expired",
    "get_flushed",
    "delete_misses",
    "delete_hits",
    "incr_misses",
    "incr_hits",
    "decr_misses",
    "decr_hits",
    "cas_misses",
    "cas_hits",
    "cas_badval",
    "touch_hits",
    "touch_misses",
    "store_too_large",
    "store_no_memory",
    "auth_cmds",
    "auth_errors",
    "bytes_read",
    "bytes_written",
    "limit_maxbytes",
    "accepting_conns",
    "listen_disabled_num",
    "threads",
    "conn_yields",
    "bytes",
    "curr_items",
    "total_items",
    "expired_unfetched",
    "evicted_unfetched",
    "evicted_active",
    "evictions",
    "reclaimed",
];

/// memcached 1.6.18's `stats settings`, in its order (those that mean something here).
const SETTINGS: &[&str] = &[
    "maxbytes",
    "maxconns",
    "tcpport",
    "udpport",
    "inter",
    "verbosity",
    "evictions",
    "domain_socket",
    "umask",
    "shutdown_command",
    "growth_factor",
    "chunk_size",
    "num_threads",
    "num_threads_per_udp",
    "stat_key_prefix",
    "detail_enabled",
    "reqs_per_event",
    "cas_enabled",
    "tcp_backlog",
    "binding_protocol",
    "auth_enabled_sasl",
    "auth_enabled_ascii",
    "item_size_max",
    "maxconns_fast",
    "flush_enabled",
    "dump_enabled",
    "idle_timeout",
    "read_buf_mem_limit",
    "track_sizes",
];

/// One statistic: its name and value.
type Pair = (Vec<u8>, Vec<u8>);

/// Answers `stats <group> <args>` into the connection's sink; how the answer ends.
pub fn stats(peer: &Peer, group: &[u8], args: &[&[u8]]) -> End {
    match group {
        b"" => {
            let Ok(engine) = engine_stats(peer, b"") else {
                return End::Engine(ENGINE_EWOULDBLOCK);
            };
            emit(
                peer,
                &merge(GENERAL, general(peer), engine, GENERAL_ALIASES),
            );
            End::List
        }
        b"settings" => {
            let engine = engine_stats(peer, b"settings").unwrap_or_default();
            emit(
                peer,
                &merge(SETTINGS, settings(peer), engine, SETTING_ALIASES),
            );
            End::List
        }
        b"reset" => {
            peer.reset_counts();
            peer.engine().reset_stats(&peer.cookie);
            End::Reset
        }
        b"items" | b"slabs" => {
            if let Some(end) = engine_group(peer, group) {
                return end;
            }
            let engine = engine_stats(peer, b"").unwrap_or_default();
            let settings = engine_stats(peer, b"settings").unwrap_or_default();
            let one_class = if group == b"items" {
                items(peer, &engine)
            } else {
                slabs(&engine, &settings)
            };
            emit_pairs(peer, &one_class);
            End::List
        }
        b"sizes" => {
            if let Some(end) = engine_group(peer, group) {
                return end;
            }
            emit(peer, &[("sizes_status".into(), "disabled".into())]);
            End::List
        }
        b"sizes_enable" => {
            // The built-in engine keeps no size histogram: memcached's answer when it cannot.
            emit(
                peer,
                &[
                    ("sizes_status".into(), "error".into()),
                    ("sizes_error".into(), "item sizes are not tracked".into()),
                ],
            );
            End::Bare
        }
        b"sizes_disable" => {
            emit(peer, &[("sizes_status".into(), "disabled".into())]);
            End::Bare
        }
        b"conns" => {
            emit(peer, &conns(peer));
            End::List
        }
        b"detail" => detail(peer, args),
        b"cachedump" => cachedump(peer, args),
        b"extstore" => End::List,
        _ => End::Engine(engine_answer(peer, group)),
    }
}

/// The engine's statistics of `group`, captured; `Err` when the call parked (it runs again
/// once the engine notifies).
fn engine_stats(peer: &Peer, group: &[u8]) -> Result<Vec<Pair>, ()> {
    peer.conn.sink().capture = Some(Vec::new());
    let rc = peer.retry(|| ok(peer.engine().get_stats(&peer.cookie, group)));
    let captured = peer.conn.sink().capture.take().unwrap_or_default();
    match rc {
        Err(ENGINE_EWOULDBLOCK) => Err(()),
        _ => Ok(captured),
    }
}

/// The engine's item memory (its `engine_maxbytes`), when it reports it.
pub fn engine_maxbytes(peer: &Peer) -> Option<u64> {
    number(&engine_stats(peer, b"").ok()?, "engine_maxbytes")
}

/// A group the engine may answer itself (`items`, `slabs`, `sizes` of memcached's default
/// engine): its answer when it gave one.
fn engine_group(peer: &Peer, group: &[u8]) -> Option<End> {
    peer.conn.sink().capture = Some(Vec::new());
    let rc = peer.retry(|| ok(peer.engine().get_stats(&peer.cookie, group)));
    let captured = peer.conn.sink().capture.take().unwrap_or_default();
    match rc {
        Err(ENGINE_EWOULDBLOCK) => Some(End::Engine(ENGINE_EWOULDBLOCK)),
        Ok(()) if !captured.is_empty() => {
            emit_pairs(peer, &captured);
            Some(End::List)
        }
        _ => None,
    }
}

/// Any other group: the engine's, streamed.
fn engine_answer(peer: &Peer, group: &[u8]) -> ENGINE_ERROR_CODE {
    let rc = peer.retry(|| ok(peer.engine().get_stats(&peer.cookie, group)));
    rc.err().unwrap_or(ENGINE_SUCCESS)
}

fn emit(peer: &Peer, stats: &[(String, String)]) {
    let mut sink = peer.conn.sink();
    for (k, v) in stats {
        push_stat(&mut sink, k.as_bytes(), v.as_bytes());
    }
}

fn emit_pairs(peer: &Peer, stats: &[Pair]) {
    let mut sink = peer.conn.sink();
    for (k, v) in stats {
        push_stat(&mut sink, k, v);
    }
}

/// memcached's name for an engine's statistic, the engine's name for it, and how its value
/// reads in memcached's spelling.
type Alias = (&'static str, &'static [u8], fn(String) -> String);

/// `order`'s names first (each from the host, else from the engine, by its own name or by the
/// engine's name `aliases` give), then the host's others, then the engine's others (but those
/// an alias took); no name twice.
fn merge(
    order: &[&str],
    host: Vec<(&'static str, String)>,
    engine: Vec<Pair>,
    aliases: &[Alias],
) -> Vec<(String, String)> {
    let engine_map: HashMap<&[u8], &[u8]> = engine.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    let host_map: HashMap<&str, &String> = host.iter().map(|(k, v)| (*k, v)).collect();
    let aliased = |name: &str| {
        let (_, from, read) = aliases.iter().find(|(n, ..)| *n == name)?;
        engine_map.get(from).map(|v| read(text(v)))
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for name in order {
        let value = host_map
            .get(name)
            .map(|v| (*v).clone())
            .or_else(|| engine_map.get(name.as_bytes()).map(|v| text(v)))
            .or_else(|| aliased(name));
        if let Some(value) = value {
            out.push(((*name).to_owned(), value));
        }
    }
    for (k, v) in &host {
        if !out.iter().any(|(n, _)| n == k) {
            out.push(((*k).to_owned(), v.clone()));
        }
    }
    for (k, v) in &engine {
        let taken = aliases.iter().any(|(_, from, _)| *from == &k[..]);
        let k = text(k);
        if !taken && !out.iter().any(|(n, _)| *n == k) {
            out.push((k, text(v)));
        }
    }
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn as_is(v: String) -> String {
    v
}

fn on_off(v: String) -> String {
    if v == "true" { "on" } else { "off" }.to_owned()
}

fn yes_no(v: String) -> String {
    if v == "true" { "yes" } else { "no" }.to_owned()
}

/// memcached's general names the engine reports under another.
const GENERAL_ALIASES: &[Alias] = &[("limit_maxbytes", b"engine_maxbytes", as_is)];

/// memcached's settings the engine reports under its configuration's names.
const SETTING_ALIASES: &[Alias] = &[
    ("maxbytes", b"cache_size", as_is),
    ("evictions", b"eviction", on_off),
    ("cas_enabled", b"use_cas", yes_no),
    ("growth_factor", b"factor", as_is),
];

/// The host's general figures for this connection.
fn general(peer: &Peer) -> Vec<(&'static str, String)> {
    let ctx = peer.ctx;
    let (user, system) = crate::process::rusage();
    let mut stats: Vec<(&'static str, String)> = vec![
        ("pid", std::process::id().to_string()),
        ("uptime", ctx.started.elapsed().as_secs().to_string()),
        (
            "time",
            server_core::abstime_of(server_core::current_time()).to_string(),
        ),
        ("version", server_core::MEMCACHED_VERSION.to_owned()),
        ("mcb_version", server_core::VERSION.to_owned()),
        (
            "pointer_size",
            (8 * std::mem::size_of::<usize>()).to_string(),
        ),
        ("rusage_user", user),
        ("rusage_system", system),
        ("max_connections", ctx.options.max_connections.to_string()),
        ("threads", ctx.options.threads.to_string()),
    ];
    if peer.sees_server() {
        let c = &ctx.connections;
        // Relaxed (every load here): statistics.
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
        stats.push(("curr_connections", n(&c.curr)));
        stats.push(("total_connections", n(&c.total)));
        stats.push(("rejected_connections", n(&c.rejected)));
        stats.push(("connection_structures", n(&c.curr)));
        let accepting = !server_core::shutdown_requested();
        stats.push(("accepting_conns", u8::from(accepting).to_string()));
        stats.push(("listen_disabled_num", "0".to_owned()));
        stats.push(("evictions_notified", host_stat::evictions().to_string()));
    }
    for (name, value) in NAMES.iter().zip(peer.counts()) {
        stats.push((name, value.to_string()));
    }
    stats
}

/// The host's settings, with this tenant's detail switch.
fn settings(peer: &Peer) -> Vec<(&'static str, String)> {
    let o = &peer.ctx.options;
    let mut s = o.settings();
    let detail = if peer.tenant().detail_enabled() {
        "yes"
    } else {
        "no"
    };
    s.push(("detail_enabled", detail.to_owned()));
    let read_buf = o
        .extended
        .iter()
        .find(|e| e.key == "read_buf_mem_limit")
        .and_then(|e| e.value.clone())
        .unwrap_or_else(|| "0".to_owned());
    s.push(("read_buf_mem_limit", read_buf));
    s
}

/// A number the engine reported.
fn number(engine: &[Pair], name: &str) -> Option<u64> {
    let (_, v) = engine.iter().find(|(k, _)| k == name.as_bytes())?;
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// `stats items` for a store without slab classes: class 1 holds every item.
fn items(peer: &Peer, engine: &[Pair]) -> Vec<Pair> {
    let Some(number) = number(engine, "curr_items").filter(|n| *n > 0) else {
        return Vec::new();
    };
    let out_of_memory = peer.counts()[counters::Stat::StoreNoMemory as usize];
    let mut out = vec![("number", number), ("outofmemory", out_of_memory)];
    for (field, engine_name) in [
        ("mem_requested", "bytes"),
        ("evicted", "evictions"),
        ("reclaimed", "reclaimed"),
    ] {
        if let Some(v) = self::number(engine, engine_name) {
            out.push((field, v));
        }
    }
    out.into_iter()
        .map(|(k, v)| {
            (
                format!("items:1:{k}").into_bytes(),
                v.to_string().into_bytes(),
            )
        })
        .collect()
}

/// `stats slabs` for a store without slab classes: class 1, chunks as large as the largest
/// item, its pages the cache's 1 MiB pages; then the totals.
fn slabs(engine: &[Pair], settings: &[Pair]) -> Vec<Pair> {
    const PAGE: u64 = 1 << 20;
    let items = number(engine, "curr_items").unwrap_or(0);
    let bytes = number(engine, "bytes").unwrap_or(0);
    let mut out: Vec<(String, u64)> = Vec::new();
    if items > 0 {
        if let Some(size) = number(settings, "item_size_max") {
            out.push(("1:chunk_size".into(), size));
        }
        if let Some(max) = number(engine, "engine_maxbytes") {
            out.push(("1:total_pages".into(), max.div_ceil(PAGE)));
        }
        out.push(("1:used_chunks".into(), items));
        for field in [
            "get_hits",
            "cmd_set",
            "delete_hits",
            "incr_hits",
            "decr_hits",
            "cas_hits",
            "cas_badval",
            "touch_hits",
        ] {
            if let Some(v) = number(engine, field) {
                out.push((format!("1:{field}"), v));
            }
        }
    }
    out.push(("active_slabs".into(), u64::from(items > 0)));
    out.push(("total_malloced".into(), bytes));
    out.into_iter()
        .map(|(k, v)| (k.into_bytes(), v.to_string().into_bytes()))
        .collect()
}

/// `stats conns`: the listening sockets, then each connection, by descriptor, with memcached's
/// fields.
fn conns(peer: &Peer) -> Vec<(String, String)> {
    let ctx = peer.ctx;
    let mut out = Vec::new();
    for (fd, addr) in &ctx.listening {
        out.push((format!("{fd}:addr"), addr.clone()));
        out.push((format!("{fd}:state"), "conn_listening".to_owned()));
    }
    let now = ctx.started.elapsed().as_secs();
    for conn in ctx.connections.live() {
        let fd = conn.fd();
        let state = if std::ptr::eq(&*conn, &*peer.conn) {
            State::ParseCmd
        } else {
            conn.state()
        };
        out.push((format!("{fd}:addr"), conn.addr.clone()));
        out.push((format!("{fd}:listen_addr"), conn.listen_addr.clone()));
        out.push((format!("{fd}:state"), state.name().to_owned()));
        let idle = now.saturating_sub(conn.last_answered());
        out.push((format!("{fd}:secs_since_last_cmd"), idle.to_string()));
    }
    out
}

/// `stats detail on|off|dump` (this tenant's).
fn detail(peer: &Peer, args: &[&[u8]]) -> End {
    let tenant = peer.tenant();
    match args.first().copied().unwrap_or_default() {
        b"on" => tenant.set_detail(true),
        b"off" => tenant.set_detail(false),
        b"dump" => {
            let dump = tenant.detail_dump();
            let mut sink = peer.conn.sink();
            if sink.ascii {
                sink.buf.extend_from_slice(&dump);
            } else {
                push_stat(&mut sink, b"detailed", &dump);
            }
            return End::List;
        }
        _ => return End::Refused("CLIENT_ERROR usage: stats detail on|off|dump"),
    }
    End::Ok
}

/// `stats cachedump <class> <limit>`: no slab class holds a list of items here, so nothing is
/// dumped (memcached's answer for an empty class).
fn cachedump(peer: &Peer, args: &[&[u8]]) -> End {
    if !peer.ctx.options.dump_enabled {
        return End::Refused("CLIENT_ERROR stats cachedump not allowed");
    }
    /// memcached's bound on slab class ids.
    const CLASSES: u32 = 64;
    match args {
        [class, limit, ..] => match (c_u32(class), c_u32(limit)) {
            (Some(class), Some(_)) if class < CLASSES => End::List,
            (Some(_), Some(_)) => End::Refused("CLIENT_ERROR Illegal slab id"),
            _ => End::Refused(BAD_FORMAT),
        },
        _ => End::Refused("CLIENT_ERROR bad command line"),
    }
}
