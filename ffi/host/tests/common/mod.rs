//! Shared by the host's tests: the engines (the C test engine built with make, and
//! libbucket_engine.so built by cargo), a server on an ephemeral loopback port killed on drop
//! (and Debian's memcached, to compare with), a process's memory figures, and small binary and
//! ASCII clients with timeouts on every read.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use mcb_testkit::c_harness::{self, Variant};
pub use mcb_testkit::process::{status, Memory};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The C test engine, built by the ABI tests' harness build (make, once per test binary, in the
/// variant matching our features). A missing make or C compiler fails loudly.
pub fn test_engine() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        c_harness::build(Variant::of(cfg!(feature = "engine-pu")))
            .join("libtest_engine.so")
            .canonicalize()
            .expect("libtest_engine.so after make")
    })
}

/// libbucket_engine.so as cargo built it for this run: the host's default engine, whose path
/// the host's build script records (`cargo test -p mcb-host` builds it as a dependency).
pub fn bucket_engine() -> PathBuf {
    let lib = PathBuf::from(env!("MCB_BUCKET_ENGINE"));
    assert!(
        lib.exists(),
        "{} is missing: build it with `cargo build -p mcb-bucket-engine` (or run the workspace's tests)",
        lib.display()
    );
    lib
}

/// A running mcb-memcached, killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    /// Starts the host with `args` (plus `-p 0`) and waits for its listening line.
    pub fn start(args: &[&str]) -> Server {
        Server::start_env(args, &[])
    }

    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::spawn(args, env, Stdio::inherit())
    }

    /// Starts the host with `args` and `env`, its stderr going to `stderr`.
    pub fn spawn(args: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcb-memcached"))
            .args(["-p", "0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start mcb-memcached");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(TIMEOUT).unwrap_or_default();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            panic!("mcb-memcached did not start ({status}); it printed {line:?}");
        };
        Server { child, port }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A number from the server's `/proc/PID/status` (`VmRSS` in KiB, `Threads`).
    pub fn status(&self, field: &str) -> u64 {
        status(self.pid(), field)
    }

    /// The server's resident memory, in bytes.
    pub fn rss(&self) -> u64 {
        Memory::of(self.pid()).rss
    }

    /// Sends `signal` to the server.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid (not yet reaped: `child` is not waited).
        assert_eq!(unsafe { libc::kill(self.pid() as i32, signal) }, 0);
    }

    /// Waits for the server to exit (after a signal); its status code.
    pub fn wait(&mut self) -> Option<i32> {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not exit"
            );
            // A pause between polls only saves CPU: the loop ends on the exit.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn connect(&self) -> TcpStream {
        connect(self.port)
    }

    pub fn binary(&self) -> Bin {
        Bin(self.connect())
    }

    pub fn ascii(&self) -> Ascii {
        let s = self.connect();
        Ascii {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }
}

impl Server {
    /// The child's stderr, when it was piped.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to a server on the loopback `port`, with [`TIMEOUT`] on reads and writes.
pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    s.set_write_timeout(Some(TIMEOUT)).expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Debian's memcached on a free loopback port, killed on drop.
pub struct Memcached {
    child: Child,
    pub port: u16,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Memcached {
    /// Starts the `memcached` on the PATH with `args`; `None` when there is none to start and
    /// `MCB_REQUIRE_MEMCACHED` is not set (`what` says what is then left unchecked).
    ///
    /// The port is free when picked but not held: a server another test starts meanwhile may
    /// take it, and then memcached exits and a connect reaches that server instead. So a start
    /// counts only once the listener's `stats` names memcached's own pid; otherwise it tries a
    /// new port.
    pub fn start(args: &[&str], what: &str) -> Option<Memcached> {
        for _ in 0..8 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut command = Command::new("memcached");
            command.args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()]);
            command.args(args);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                command.args(["-u", "nobody"]);
            }
            let child = command.stdout(Stdio::null()).spawn();
            let mut memcached = match child {
                Ok(child) => Memcached { child, port },
                Err(e) if std::env::var_os("MCB_REQUIRE_MEMCACHED").is_none() => {
                    eprintln!("memcached not started ({e}): {what} is not checked against it");
                    return None;
                }
                Err(e) => panic!("memcached: {e}"),
            };
            if memcached.listens() {
                return Some(memcached);
            }
        }
        panic!("memcached never listened on a port of its own");
    }

    /// Waits until this memcached accepts on its port: false when it exits first (its port
    /// was taken) or another process answers there.
    fn listens(&mut self) -> bool {
        // memcached says nothing when it listens: wait until it accepts (or gives up).
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            if self.child.try_wait().ok().flatten().is_some() {
                return false;
            }
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                return self.answers_on(stream).unwrap_or(false);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "memcached never listened"
            );
            std::thread::yield_now();
        }
    }

    /// Whether the server on `stream` gives this memcached's pid in its `stats`.
    fn answers_on(&self, stream: TcpStream) -> std::io::Result<bool> {
        stream.set_read_timeout(Some(TIMEOUT))?;
        (&stream).write_all(b"stats\r\n")?;
        let mine = format!("STAT pid {}", self.child.id());
        for line in BufReader::new(stream).lines() {
            match line?.trim_end() {
                "END" => return Ok(false),
                line if line == mine => return Ok(true),
                _ => {}
            }
        }
        Ok(false)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Runs the host with `args` expecting it to exit; its status and stderr.
pub fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcb-memcached"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mcb-memcached");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------------
// Binary protocol

pub const GET: u8 = 0x00;
pub const SET: u8 = 0x01;
pub const ADD: u8 = 0x02;
pub const REPLACE: u8 = 0x03;
pub const DELETE: u8 = 0x04;
pub const INCR: u8 = 0x05;
pub const DECR: u8 = 0x06;
pub const QUIT: u8 = 0x07;
pub const FLUSH: u8 = 0x08;
pub const GETQ: u8 = 0x09;
pub const NOOP: u8 = 0x0a;
pub const VERSION: u8 = 0x0b;
pub const GETK: u8 = 0x0c;
pub const GETKQ: u8 = 0x0d;
pub const APPEND: u8 = 0x0e;
pub const PREPEND: u8 = 0x0f;
pub const STAT: u8 = 0x10;
pub const SETQ: u8 = 0x11;
pub const DELETEQ: u8 = 0x14;
pub const INCRQ: u8 = 0x15;
pub const VERBOSITY: u8 = 0x1b;
pub const SASL_LIST: u8 = 0x20;
pub const SASL_AUTH: u8 = 0x21;
pub const CREATE_BUCKET: u8 = 0x85;
pub const DELETE_BUCKET: u8 = 0x86;
pub const LIST_BUCKETS: u8 = 0x87;
pub const SELECT_BUCKET: u8 = 0x89;

pub const SUCCESS: u16 = 0x00;
pub const KEY_ENOENT: u16 = 0x01;
pub const KEY_EEXISTS: u16 = 0x02;
pub const E2BIG: u16 = 0x03;
pub const EINVAL: u16 = 0x04;
pub const NOT_STORED: u16 = 0x05;
pub const DELTA_BADVAL: u16 = 0x06;
pub const AUTH_ERROR: u16 = 0x20;
pub const UNKNOWN_COMMAND: u16 = 0x81;

/// A request packet.
pub fn packet(opcode: u8, extras: &[u8], key: &[u8], value: &[u8], cas: u64) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut p = vec![0x80, opcode];
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
    p.extend_from_slice(&(body as u32).to_be_bytes());
    p.extend_from_slice(&0xdead_beefu32.to_be_bytes());
    p.extend_from_slice(&cas.to_be_bytes());
    p.extend_from_slice(extras);
    p.extend_from_slice(key);
    p.extend_from_slice(value);
    p
}

/// A response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// A binary client.
pub struct Bin(pub TcpStream);

impl Bin {
    pub fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).expect("send");
    }

    pub fn recv(&mut self) -> Resp {
        self.try_recv().expect("a response")
    }

    /// The next response, or `None` when the server closed the connection.
    pub fn try_recv(&mut self) -> Option<Resp> {
        let mut h = [0u8; 24];
        self.0.read_exact(&mut h).ok()?;
        assert_eq!(h[0], 0x81, "response magic");
        let keylen = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let extlen = usize::from(h[4]);
        let bodylen = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let mut body = vec![0u8; bodylen];
        self.0.read_exact(&mut body).ok()?;
        Some(Resp {
            opcode: h[1],
            status: u16::from_be_bytes([h[6], h[7]]),
            opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
            cas: u64::from_be_bytes(h[16..24].try_into().unwrap()),
            extras: body[..extlen].to_vec(),
            key: body[extlen..extlen + keylen].to_vec(),
            value: body[extlen + keylen..].to_vec(),
        })
    }

    /// Sends one request and reads its response.
    pub fn call(&mut self, opcode: u8, extras: &[u8], key: &[u8], value: &[u8], cas: u64) -> Resp {
        self.send(&packet(opcode, extras, key, value, cas));
        let r = self.recv();
        assert_eq!(r.opcode, opcode, "response to {opcode:#x}: {r:?}");
        r
    }

    pub fn set(&mut self, key: &[u8], value: &[u8], flags: u32) -> Resp {
        let mut extras = flags.to_be_bytes().to_vec();
        extras.extend_from_slice(&0u32.to_be_bytes());
        self.call(SET, &extras, key, value, 0)
    }

    pub fn get(&mut self, key: &[u8]) -> Resp {
        self.call(GET, &[], key, &[], 0)
    }

    /// SASL PLAIN.
    pub fn auth(&mut self, user: &str, password: &str) -> Resp {
        let message = format!("\0{user}\0{password}");
        self.call(SASL_AUTH, &[], b"PLAIN", message.as_bytes(), 0)
    }

    /// The stats of `group` as (key, value) pairs, until the empty terminator.
    pub fn stats(&mut self, group: &[u8]) -> Vec<(String, String)> {
        self.send(&packet(STAT, &[], group, &[], 0));
        let mut out = Vec::new();
        loop {
            let r = self.recv();
            assert_eq!(r.status, SUCCESS, "stats {group:?}: {r:?}");
            if r.key.is_empty() {
                return out;
            }
            out.push((
                String::from_utf8_lossy(&r.key).into_owned(),
                String::from_utf8_lossy(&r.value).into_owned(),
            ));
        }
    }

    /// Polls the default stats group until `name` has `value`: how a test waits for the engine
    /// to reach a state (a connection parked, a disconnect seen) instead of sleeping and hoping.
    /// Fails after [`TIMEOUT`] with the last value seen.
    pub fn wait_for_stat(&mut self, name: &str, value: &str) {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let stats = self.stats(b"");
            let seen = stats
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str());
            if seen == Some(value) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "stat {name} is {seen:?}, not {value:?}, after {TIMEOUT:?}"
            );
            // A pause between polls only saves CPU: the loop ends on the state, not the time.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ASCII protocol

pub struct Ascii {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Ascii {
    pub fn send(&mut self, text: &[u8]) {
        self.w.write_all(text).expect("send");
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("a line");
        line.trim_end_matches(['\r', '\n']).to_owned()
    }

    /// Sends a command and reads one line back.
    pub fn cmd(&mut self, text: &str) -> String {
        self.send(text.as_bytes());
        self.line()
    }

    /// The `stats` group as (name, value) pairs, in the server's order.
    pub fn stats(&mut self, group: &str) -> Vec<(String, String)> {
        self.send(format!("stats {group}\r\n").as_bytes());
        let mut out = Vec::new();
        loop {
            let line = self.line();
            if line == "END" {
                return out;
            }
            let mut parts = line.splitn(3, ' ');
            assert_eq!(parts.next(), Some("STAT"), "{line}");
            let (k, v) = (parts.next().unwrap(), parts.next().unwrap_or(""));
            out.push((k.to_owned(), v.to_owned()));
        }
    }
}

/// The first value named `name` in `stats` (a host's own counters come before its engine's).
pub fn stat_value<'a>(stats: &'a [(String, String)], name: &str) -> Option<&'a str> {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}
