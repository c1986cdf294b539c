//! Fills a memcached server with distinct keys past its capacity and counts what it kept: the
//! density measurement of `benches/store_density.sh`. Keys are `key:` and eight digits
//! (12 bytes), values `--value` bytes; sets go pipelined in batches of quiet SETs (SETQ) closed
//! by a NOOP, then every key is read back the same way (GETKQ) and the hits are counted. Prints
//! one line: `stored=N kept=N curr_items=N bytes=N`.
//!
//!     cargo run --release -p mcb-benches --example fill -- --port 11211 --keys 2000000 --value 100

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;

const SETQ: u8 = 0x11;
const GETKQ: u8 = 0x0d;
const NOOP: u8 = 0x0a;
const STAT: u8 = 0x10;
const BATCH: u64 = 500;

fn header(buf: &mut Vec<u8>, opcode: u8, key: usize, extras: u8, body: usize) {
    buf.extend_from_slice(&[0x80, opcode]);
    buf.extend_from_slice(&(key as u16).to_be_bytes());
    buf.extend_from_slice(&[extras, 0, 0, 0]);
    buf.extend_from_slice(&(body as u32).to_be_bytes());
    buf.extend_from_slice(&[0; 12]);
}

fn key(i: u64) -> String {
    format!("key:{i:08}")
}

/// Reads responses up to the NOOP's; returns how many others came with status 0 and how many
/// with another.
fn drain(r: &mut impl Read) -> (u64, u64) {
    let (mut ok, mut failed) = (0, 0);
    loop {
        let mut h = [0u8; 24];
        r.read_exact(&mut h).expect("a response");
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let mut rest = vec![0; body];
        r.read_exact(&mut rest).expect("the body");
        if h[1] == NOOP {
            return (ok, failed);
        }
        if u16::from_be_bytes([h[6], h[7]]) == 0 {
            ok += 1;
        } else {
            failed += 1;
        }
    }
}

/// The server's `stats` as name/value pairs.
fn stats(s: &mut TcpStream, r: &mut impl Read) -> Vec<(String, String)> {
    let mut buf = Vec::new();
    header(&mut buf, STAT, 0, 0, 0);
    s.write_all(&buf).expect("send");
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; 24];
        r.read_exact(&mut h).expect("a stat");
        let klen = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let mut rest = vec![0; body];
        r.read_exact(&mut rest).expect("the stat");
        if klen == 0 {
            return out;
        }
        let (k, v) = rest.split_at(klen);
        out.push((
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
    }
}

fn main() {
    let (mut port, mut keys, mut value) = (11211u16, 2_000_000u64, 100usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, v] = pair else {
            panic!("{} needs a value", pair[0]);
        };
        match flag.as_str() {
            "--port" => port = v.parse().expect("a port"),
            "--keys" => keys = v.parse().expect("a count"),
            "--value" => value = v.parse().expect("a size"),
            _ => panic!("unknown option {flag}"),
        }
    }
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut r = BufReader::with_capacity(1 << 20, s.try_clone().expect("clone"));
    let data = vec![b'v'; value];
    let mut buf = Vec::new();
    let mut failed = 0;
    for start in (0..keys).step_by(BATCH as usize) {
        buf.clear();
        for i in start..(start + BATCH).min(keys) {
            let k = key(i);
            header(&mut buf, SETQ, k.len(), 8, 8 + k.len() + value);
            buf.extend_from_slice(&[0; 8]);
            buf.extend_from_slice(k.as_bytes());
            buf.extend_from_slice(&data);
        }
        header(&mut buf, NOOP, 0, 0, 0);
        s.write_all(&buf).expect("send");
        // Quiet sets answer only failures: count those.
        failed += drain(&mut r).1;
    }
    let mut kept = 0;
    for start in (0..keys).step_by(BATCH as usize) {
        buf.clear();
        for i in start..(start + BATCH).min(keys) {
            let k = key(i);
            header(&mut buf, GETKQ, k.len(), 0, k.len());
            buf.extend_from_slice(k.as_bytes());
        }
        header(&mut buf, NOOP, 0, 0, 0);
        s.write_all(&buf).expect("send");
        kept += drain(&mut r).0;
    }
    let stats = stats(&mut s, &mut r);
    let stat = |name: &str| {
        stats
            .iter()
            .find(|(k, _)| k == name)
            .map_or("?", |(_, v)| v.as_str())
            .to_owned()
    };
    println!(
        "stored={} kept={kept} curr_items={} bytes={} evictions={}",
        keys.saturating_sub(failed),
        stat("curr_items"),
        stat("bytes"),
        stat("evictions")
    );
}
