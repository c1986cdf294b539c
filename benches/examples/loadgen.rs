//! A small closed-loop load generator for memcached servers (binary protocol): N connections,
//! each sending one request and waiting for its answer, a fixed get/set mix over a fixed key
//! space (fixed RNG seeds), for a fixed time. Prints one line: operations per second and the
//! p50/p99 latency in microseconds. `ffi/host/tests/bench.sh` runs it against Debian's memcached
//! and mcb-memcached and prints the ratios. With `--multi N` every request is a pipelined
//! multi-get instead: N GETKQ and a NOOP, as binary clients send one (each key counts as an
//! operation; the latency is the whole request's). With `--meta 1` the mix speaks memcached
//! 1.6's meta commands instead: `mg <key> v f t` and `ms <key> <len> T0`. With `--zipf S` it
//! runs a cache-aside loop instead (no preload: a get, and on a miss a set of the key) over
//! Zipf-distributed keys, each key's value between `--value` and `--value-max` bytes (fixed
//! per key), and also prints the gets' hit ratio over the run's second half.
//!
//!     cargo run --release -p mcb-benches --example loadgen -- \
//!         --port 11211 --conns 8 --secs 5 --get-ratio 0.9 --keys 10000 --value 100 \
//!         [--multi 100 | --meta 1 | --zipf 0.99 --value-max 4096]

use mcb_benches::{stream_seed, zipf, Rng};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Args {
    port: u16,
    conns: usize,
    secs: u64,
    get_ratio: f64,
    keys: u64,
    value: usize,
    multi: usize,
    meta: bool,
    zipf: f64,
    value_max: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        port: 11211,
        conns: 8,
        secs: 5,
        get_ratio: 0.9,
        keys: 10_000,
        value: 100,
        multi: 0,
        meta: false,
        zipf: 0.0,
        value_max: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let bad = || format!("bad value {value:?} for {flag}");
        match flag.as_str() {
            "--port" => a.port = value.parse().map_err(|_| bad())?,
            "--conns" => a.conns = value.parse().map_err(|_| bad())?,
            "--secs" => a.secs = value.parse().map_err(|_| bad())?,
            "--get-ratio" => a.get_ratio = value.parse().map_err(|_| bad())?,
            "--keys" => a.keys = value.parse().map_err(|_| bad())?,
            "--value" => a.value = value.parse().map_err(|_| bad())?,
            "--multi" => a.multi = value.parse().map_err(|_| bad())?,
            "--meta" => a.meta = value != "0",
            "--zipf" => a.zipf = value.parse().map_err(|_| bad())?,
            "--value-max" => a.value_max = value.parse().map_err(|_| bad())?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    a.value_max = a.value_max.max(a.value);
    Ok(a)
}

/// Writes a GET (`value` empty) or SET request for `key` into `buf`.
fn request(buf: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    let opcode = if value.is_some() { 0x01 } else { 0x00 };
    buf.clear();
    append(buf, opcode, key, value);
}

/// Appends a request packet (`value`: a SET's, with zero flags and expiry).
fn append(buf: &mut Vec<u8>, opcode: u8, key: &[u8], value: Option<&[u8]>) {
    let extlen = if value.is_some() { 8u8 } else { 0 };
    let body = usize::from(extlen) + key.len() + value.map_or(0, <[u8]>::len);
    buf.extend_from_slice(&[0x80, opcode]);
    buf.extend_from_slice(&(key.len() as u16).to_be_bytes());
    buf.extend_from_slice(&[extlen, 0, 0, 0]);
    buf.extend_from_slice(&(body as u32).to_be_bytes());
    buf.extend_from_slice(&[0; 12]);
    if let Some(v) = value {
        buf.extend_from_slice(&[0; 8]); // flags, exptime
        buf.extend_from_slice(key);
        buf.extend_from_slice(v);
    } else {
        buf.extend_from_slice(key);
    }
}

/// Reads one response (reusing `buf`); its status.
fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<u16> {
    let mut h = [0u8; 24];
    s.read_exact(&mut h)?;
    let bodylen = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    buf.resize(bodylen, 0);
    s.read_exact(buf)?;
    Ok(u16::from_be_bytes([h[6], h[7]]))
}

/// Writes a meta get (`mg <key> v f t`) or meta set (`ms <key> <len> T0`) into `buf`.
fn meta_request(buf: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    buf.clear();
    buf.extend_from_slice(if value.is_some() { b"ms " } else { b"mg " });
    buf.extend_from_slice(key);
    match value {
        Some(v) => {
            let _ = write!(buf, " {} T0\r\n", v.len());
            buf.extend_from_slice(v);
            buf.extend_from_slice(b"\r\n");
        }
        None => buf.extend_from_slice(b" v f t\r\n"),
    }
}

/// Reads one meta answer (a `VA` line's value too); whether it was `HD`, `VA` or `EN`.
fn meta_response(r: &mut BufReader<TcpStream>, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    r.read_until(b'\n', line)?;
    if let Some(rest) = line.strip_prefix(b"VA ") {
        let len = rest.iter().take_while(|b| b.is_ascii_digit());
        let len = len.fold(0usize, |n, &d| n * 10 + usize::from(d - b'0'));
        let mut value = vec![0; len + 2];
        r.read_exact(&mut value)?;
        return Ok(true);
    }
    Ok(line.starts_with(b"HD") || line.starts_with(b"EN"))
}

fn key(buf: &mut Vec<u8>, n: u64) {
    buf.clear();
    let _ = write!(buf, "loadgen:{n}");
}

fn connect(port: u16) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

/// A pipelined multi-get of `keys`: GETKQ each, then NOOP; reads the hits and the NOOP's
/// answer.
fn multi_get(
    s: &mut TcpStream,
    keys: impl Iterator<Item = u64>,
    out: &mut Vec<u8>,
    inp: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut k = Vec::new();
    out.clear();
    for n in keys {
        key(&mut k, n);
        append(out, 0x0d, &k, None);
    }
    append(out, 0x0a, &[], None);
    s.write_all(out)?;
    loop {
        let mut h = [0u8; 24];
        s.read_exact(&mut h)?;
        let bodylen = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        inp.resize(bodylen, 0);
        s.read_exact(inp)?;
        if h[1] == 0x0a {
            return Ok(());
        }
    }
}

/// Gets that hit and that missed, counted over a run's second half.
#[derive(Default)]
struct Hits {
    hits: u64,
    misses: u64,
}

/// The cache-aside loop of `--zipf`: its latencies (one per get, or get and set on a miss)
/// and the hits counted after `warm`.
fn cache_aside(
    a: &Args,
    seed: u64,
    warm: Instant,
    deadline: Instant,
) -> std::io::Result<(Vec<u32>, Hits)> {
    let mut s = connect(a.port)?;
    let trace = zipf(a.keys as usize, a.zipf, 1 << 20, seed);
    let value = vec![b'v'; a.value_max];
    let span = (a.value_max - a.value + 1) as u64;
    let (mut out, mut inp, mut k) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lat, mut hits) = (Vec::with_capacity(1 << 20), Hits::default());
    for &n in trace.iter().cycle() {
        let start = Instant::now();
        if start >= deadline {
            break;
        }
        key(&mut k, n);
        request(&mut out, &k, None);
        s.write_all(&out)?;
        let hit = match response(&mut s, &mut inp)? {
            0 => true,
            1 => false,
            status => return Err(std::io::Error::other(format!("status {status:#x}"))),
        };
        if !hit {
            // The key's own size, the same on every run and server.
            let len = a.value + ((n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % span) as usize;
            request(&mut out, &k, Some(&value[..len]));
            s.write_all(&out)?;
            match response(&mut s, &mut inp)? {
                // Stored, or too large for this server (counted as the miss it is).
                0 | 3 => {}
                status => return Err(std::io::Error::other(format!("status {status:#x}"))),
            }
        }
        lat.push(start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        if start >= warm {
            if hit {
                hits.hits += 1;
            } else {
                hits.misses += 1;
            }
        }
    }
    Ok((lat, hits))
}

/// One connection's run: its latencies in microseconds (with `--multi`, one per request).
fn run(a: &Args, seed: u64, deadline: Instant) -> std::io::Result<Vec<u32>> {
    let mut s = connect(a.port)?;
    if a.multi > 0 {
        let (mut out, mut inp) = (Vec::new(), Vec::new());
        let mut rng = Rng(seed);
        let mut lat = Vec::with_capacity(1 << 16);
        while Instant::now() < deadline {
            let start = Instant::now();
            let keys = (0..a.multi)
                .map(|_| rng.next_u64() % a.keys)
                .collect::<Vec<_>>();
            multi_get(&mut s, keys.into_iter(), &mut out, &mut inp)?;
            lat.push(start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        }
        return Ok(lat);
    }
    let value = vec![b'v'; a.value];
    let (mut out, mut inp, mut k) = (Vec::new(), Vec::new(), Vec::new());
    let mut rng = Rng(seed);
    let mut lat = Vec::with_capacity(1 << 20);
    let threshold = (a.get_ratio * u64::MAX as f64) as u64;
    if a.meta {
        let mut r = BufReader::new(s.try_clone()?);
        while Instant::now() < deadline {
            key(&mut k, rng.next_u64() % a.keys);
            let get = rng.next_u64() < threshold;
            meta_request(&mut out, &k, (!get).then_some(&value[..]));
            let start = Instant::now();
            s.write_all(&out)?;
            let answered = meta_response(&mut r, &mut inp)?;
            lat.push(start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
            if !answered {
                let text = String::from_utf8_lossy(&inp);
                return Err(std::io::Error::other(format!("answer {text:?}")));
            }
        }
        return Ok(lat);
    }
    while Instant::now() < deadline {
        key(&mut k, rng.next_u64() % a.keys);
        let get = rng.next_u64() < threshold;
        request(&mut out, &k, (!get).then_some(&value[..]));
        let start = Instant::now();
        s.write_all(&out)?;
        let status = response(&mut s, &mut inp)?;
        lat.push(start.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        if status != 0 && !(get && status == 1) {
            return Err(std::io::Error::other(format!("status {status:#x}")));
        }
    }
    Ok(lat)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(why) => {
            eprintln!("loadgen: {why}");
            std::process::exit(2);
        }
    };
    if a.zipf > 0.0 {
        return cache_aside_main(&a);
    }
    // Every key exists before the run, so gets measure hits.
    let preload = || -> std::io::Result<()> {
        let mut s = connect(a.port)?;
        let value = vec![b'v'; a.value];
        let (mut out, mut inp, mut k) = (Vec::new(), Vec::new(), Vec::new());
        for n in 0..a.keys {
            key(&mut k, n);
            request(&mut out, &k, Some(&value));
            s.write_all(&out)?;
            response(&mut s, &mut inp)?;
        }
        Ok(())
    };
    if let Err(e) = preload() {
        eprintln!("loadgen: preload failed: {e}");
        std::process::exit(1);
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.secs);
    let results = on_connections(a.conns, |i| {
        run(&a, stream_seed(0x9e37_79b9_7f4a_7c15, i), deadline)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let all = results.into_iter().flatten().collect();
    report(all, a.multi.max(1), elapsed, "");
}

/// Runs `job(i)` for each of `conns` connections on a thread of its own, all at once; their
/// results, or (the first error printed) an exit with status 1.
fn on_connections<T: Send>(conns: usize, job: impl Fn(u64) -> std::io::Result<T> + Sync) -> Vec<T> {
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..conns as u64)
            .map(|i| {
                let job = &job;
                scope.spawn(move || job(i))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a load thread"))
            .collect()
    });
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|e| {
                eprintln!("loadgen: {e}");
                std::process::exit(1)
            })
        })
        .collect()
}

/// Prints the result line: operations per second, p50 and p99, and `extra`.
fn report(mut all: Vec<u32>, per_request: usize, elapsed: f64, extra: &str) {
    all.sort_unstable();
    let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)));
    let ops = all.len() * per_request;
    println!(
        "ops_per_sec={:.0} p50_us={} p99_us={} ops={}{extra}",
        ops as f64 / elapsed,
        pct(0.50).copied().unwrap_or(0),
        pct(0.99).copied().unwrap_or(0),
        ops
    );
}

/// `--zipf`: every connection's cache-aside loop, then the result line with the hit ratio.
fn cache_aside_main(a: &Args) {
    let started = Instant::now();
    let warm = started + Duration::from_secs(a.secs) / 2;
    let deadline = started + Duration::from_secs(a.secs);
    let results = on_connections(a.conns, |i| {
        cache_aside(a, stream_seed(0x51_7cc1_b727_220a, i), warm, deadline)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let (mut all, mut total) = (Vec::new(), Hits::default());
    for (lat, hits) in results {
        all.extend(lat);
        total.hits += hits.hits;
        total.misses += hits.misses;
    }
    let gets = (total.hits + total.misses).max(1);
    let extra = format!(
        " hits={} misses={} hit_ratio={:.4}",
        total.hits,
        total.misses,
        total.hits as f64 / gets as f64
    );
    report(all, 1, elapsed, &extra);
}
