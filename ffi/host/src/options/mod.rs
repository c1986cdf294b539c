//! The command line: memcached 1.6's options, short and long (`-m 64`, `-m64`,
//! `--memory-limit=64`, `--memory-limit 64`, bundled flags as in `-dv`), with their meaning
//! here, plus the engine options of memcached's engine branch (`-E`, `-e`) and `--sasl-pwdb`.
//! memcached's engine settings (`-m`, `-M`, `-C`, `-I`, `-n`, `-f`, `-L`) become the engine
//! configuration keys memcached's engine branch gave them (`cache_size`, `eviction`, ...; see
//! [`crate::config::engine_config`]). Options that cannot mean here what they mean to memcached
//! (UDP, TLS, a memory file) are refused with the reason, not silently dropped.

pub mod extended;

use std::path::PathBuf;
use std::time::Duration;

/// The bucket engine's configuration when neither `-E` nor `-e` is given: the built-in storage
/// engine as the default bucket. `MCB_DEFAULT_ENGINE_CONFIG` replaces it (e.g. to serve an
/// external engine as the default bucket: `engine=/abs/path/lib.so;default=true`).
pub const DEFAULT_ENGINE_CONFIG: &str = "engine=builtin;default=true";

/// The engine when `-E` is not given: the `libbucket_engine.so` that the cargo invocation which
/// built this binary built too (its exact path, recorded by build.rs).
pub const DEFAULT_ENGINE: &str = env!("MCB_BUCKET_ENGINE");

/// The host's version (what `-V` prints).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which protocols connections may speak (`-B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Auto,
    Binary,
    Ascii,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub port: u16,
    /// `-l`: the addresses to listen on, each optionally with its own port (`host:port`,
    /// `[v6]:port`).
    pub listen: Vec<String>,
    pub threads: u32,
    pub max_connections: usize,
    pub engine: String,
    pub engine_config: Option<String>,
    /// Engine configuration keys from memcached's options (`-m` gives `cache_size`, ...), in
    /// the order given.
    pub engine_settings: Vec<(&'static str, String)>,
    pub require_sasl: bool,
    pub verbosity: u32,
    pub sasl_pwdb: Option<PathBuf>,
    /// `-Y`: ASCII authentication against this file (`user:password` lines).
    pub auth_file: Option<PathBuf>,
    pub unix_socket: Option<PathBuf>,
    /// `-a`: the unix socket's access mode.
    pub unix_mask: u32,
    pub reqs_per_event: usize,
    pub backlog: i32,
    pub protocol: Protocol,
    pub idle_timeout: Option<Duration>,
    /// `-A`: the ASCII `shutdown` command is allowed.
    pub allow_shutdown: bool,
    /// Not `-F`: `flush_all` and binary FLUSH are allowed.
    pub flush_enabled: bool,
    /// Not `-X`: `stats cachedump` is allowed.
    pub dump_enabled: bool,
    /// Not `-W`.
    pub watch_enabled: bool,
    /// `-d`.
    pub daemonize: bool,
    /// `-P`.
    pub pid_file: Option<PathBuf>,
    /// `-u`: the user to become when started as root.
    pub user: Option<String>,
    /// `-k`.
    pub lock_memory: bool,
    /// `-r`.
    pub coredumps: bool,
    /// `-D`: the key prefix delimiter of `stats detail` (given: detail starts on).
    pub prefix_delimiter: Option<u8>,
    /// `-o` keys, as given.
    pub extended: Vec<extended::Extended>,
}

/// How the process ends after parsing when it does not serve.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Options>),
    /// Print this on stdout and exit 0 (`-h`, `-V`, `-i`).
    Print(String),
}

/// memcached 1.6's options and ours: the letter, the long name, whether a value follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Port,
    UdpPort,
    UnixSocket,
    UnixMask,
    EnableShutdown,
    Listen,
    Daemon,
    Coredumps,
    User,
    MemoryLimit,
    DisableEvictions,
    ConnLimit,
    LockMemory,
    Verbose,
    Help,
    License,
    Version,
    PidFile,
    GrowthFactor,
    MinSize,
    LargePages,
    Delimiter,
    Threads,
    ReqsPerEvent,
    DisableCas,
    Backlog,
    Protocol,
    MaxItemSize,
    Sasl,
    DisableFlush,
    DisableDumping,
    DisableWatch,
    AuthFile,
    EngineConfig,
    Engine,
    MemoryFile,
    Ssl,
    Extended,
    NapiIds,
    SaslPwdb,
}

/// The engine configuration keys memcached's options stand for (as memcached's engine branch
/// maps them), by option.
const ENGINE_OPTIONS: &[(&str, &str)] = &[
    ("-m", "cache_size"),
    ("-M", "eviction"),
    ("-C", "use_cas"),
    ("-I", "item_size_max"),
    ("-n", "chunk_size"),
    ("-f", "factor"),
    ("-L", "preallocate"),
];

/// The option that gives engine key `key` (for error messages).
pub fn engine_option(key: &str) -> &'static str {
    ENGINE_OPTIONS
        .iter()
        .find(|(_, k)| *k == key)
        .map_or("an option", |(o, _)| o)
}

/// One option: its letter, long name, value, and `-h` text.
struct Spec {
    opt: Opt,
    short: Option<u8>,
    long: &'static str,
    /// The value's name in `-h` (`None`: a flag).
    value: Option<&'static str>,
    help: &'static str,
}

const fn spec(
    opt: Opt,
    short: Option<u8>,
    long: &'static str,
    value: Option<&'static str>,
    help: &'static str,
) -> Spec {
    Spec {
        opt,
        short,
        long,
        value,
        help,
    }
}

#[rustfmt::skip]
const SPECS: &[Spec] = &[
    spec(Opt::Port, Some(b'p'), "port", Some("num"), "TCP port to listen on (default: 11211; 0 picks a free one)"),
    spec(Opt::UdpPort, Some(b'U'), "udp-port", Some("num"), "UDP port: only 0 (off, memcached's default); UDP is not served"),
    spec(Opt::UnixSocket, Some(b's'), "unix-socket", Some("file"), "UNIX socket to listen on (disables TCP)"),
    spec(Opt::UnixMask, Some(b'a'), "unix-mask", Some("mask"), "access mask for the UNIX socket, in octal (default: 700)"),
    spec(Opt::EnableShutdown, Some(b'A'), "enable-shutdown", None, "enable the ASCII \"shutdown\" command"),
    spec(Opt::Listen, Some(b'l'), "listen", Some("addr"), "interfaces to listen on, comma separated, each optionally host:port (default: 127.0.0.1)"),
    spec(Opt::Daemon, Some(b'd'), "daemon", None, "run as a daemon (the command returns once the server listens)"),
    spec(Opt::Coredumps, Some(b'r'), "enable-coredumps", None, "maximize core file limit"),
    spec(Opt::User, Some(b'u'), "user", Some("user"), "assume identity of <user> (only when run as root)"),
    spec(Opt::MemoryLimit, Some(b'm'), "memory-limit", Some("num"), "item memory in megabytes: the engine's cache_size (default: the engine's, 64)"),
    spec(Opt::DisableEvictions, Some(b'M'), "disable-evictions", None, "return error on memory exhausted instead of evicting: the engine's eviction=false"),
    spec(Opt::ConnLimit, Some(b'c'), "conn-limit", Some("num"), "max simultaneous connections (default: 1024)"),
    spec(Opt::LockMemory, Some(b'k'), "lock-memory", None, "lock down all paged memory"),
    spec(Opt::Verbose, Some(b'v'), "verbose", None, "verbose (-vv, -vvv: more)"),
    spec(Opt::Help, Some(b'h'), "help", None, "print this help and exit"),
    spec(Opt::License, Some(b'i'), "license", None, "print the license and exit"),
    spec(Opt::Version, Some(b'V'), "version", None, "print version and exit"),
    spec(Opt::PidFile, Some(b'P'), "pidfile", Some("file"), "save the PID in <file> (with or without -d, as memcached 1.6)"),
    spec(Opt::GrowthFactor, Some(b'f'), "slab-growth-factor", Some("num"), "the engine's factor (the built-in engine has no slabs: ignored)"),
    spec(Opt::MinSize, Some(b'n'), "slab-min-size", Some("bytes"), "the engine's chunk_size (the built-in engine has no slabs: ignored)"),
    spec(Opt::LargePages, Some(b'L'), "enable-largepages", None, "the engine's preallocate=true (ignored by the built-in engine)"),
    spec(Opt::Delimiter, Some(b'D'), "prefix-delimiter", Some("char"), "delimiter of key prefixes for `stats detail` (given: detail starts on)"),
    spec(Opt::Threads, Some(b't'), "threads", Some("num"), "number of worker threads (default: 4)"),
    spec(Opt::ReqsPerEvent, Some(b'R'), "max-reqs-per-event", Some("num"), "requests per event before other connections get a turn (default: 20)"),
    spec(Opt::DisableCas, Some(b'C'), "disable-cas", None, "disable use of CAS: the engine's use_cas=false"),
    spec(Opt::Backlog, Some(b'b'), "listen-backlog", Some("num"), "set the backlog queue limit (default: 1024)"),
    spec(Opt::Protocol, Some(b'B'), "protocol", Some("name"), "ascii, binary, or auto (default: auto)"),
    spec(Opt::MaxItemSize, Some(b'I'), "max-item-size", Some("size"), "max item size, k/m suffixes allowed: the engine's item_size_max (default: 1m)"),
    spec(Opt::Sasl, Some(b'S'), "enable-sasl", None, "require SASL authentication (binary protocol; not with -B ascii)"),
    spec(Opt::DisableFlush, Some(b'F'), "disable-flush-all", None, "disable flush_all (and binary FLUSH)"),
    spec(Opt::DisableDumping, Some(b'X'), "disable-dumping", None, "disable stats cachedump"),
    spec(Opt::DisableWatch, Some(b'W'), "disable-watch", None, "disable watch commands (there are none: accepted)"),
    spec(Opt::AuthFile, Some(b'Y'), "auth-file", Some("file"), "ASCII authentication, user:pass lines; the user lands in their bucket"),
    spec(Opt::EngineConfig, Some(b'e'), "engine-config", Some("config"), "engine configuration, key=value;... (memcached's engine branch's -e)"),
    spec(Opt::Engine, Some(b'E'), "engine", Some("path"), "engine library (default: the libbucket_engine.so built with this binary)"),
    spec(Opt::MemoryFile, None, "memory-file", Some("file"), "refused: no restartable cache (-e is the engine configuration here)"),
    spec(Opt::Ssl, Some(b'Z'), "enable-ssl", None, "refused: TLS is not supported"),
    spec(Opt::Extended, Some(b'o'), "extended", Some("opts"), "comma separated extended options (below)"),
    spec(Opt::NapiIds, Some(b'N'), "napi_ids", Some("num"), "accepted, ignored (connections are not grouped by NAPI id)"),
    spec(Opt::SaslPwdb, None, "sasl-pwdb", Some("file"), "SASL password file, \"user password [config]\" lines (default: $MEMCACHED_SASL_PWDB)"),
];

/// The `-h` text.
pub fn usage() -> String {
    let mut text = format!("mcb-memcached {VERSION} (memcached 1.6's options)\n");
    for s in SPECS {
        let short = s
            .short
            .map_or("    ".to_owned(), |c| format!("-{}, ", c as char));
        let long = match s.value {
            Some(v) => format!("--{}=<{v}>", s.long),
            None => format!("--{}", s.long),
        };
        text.push_str(&format!("{short}{long:<28} {}\n", s.help));
    }
    text.push_str("extended options (-o), memcached 1.6.18's keys:\n");
    text.push_str(&extended::usage());
    text
}

fn value<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("invalid value {text:?} for {flag}"))
}

/// A size as memcached's `-I` reads it: bytes, or with a `k` or `m` suffix.
fn size(flag: &str, text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.as_bytes().last() {
        Some(b'k' | b'K') => (&text[..text.len() - 1], 1 << 10),
        Some(b'm' | b'M') => (&text[..text.len() - 1], 1 << 20),
        _ => (text, 1),
    };
    let n: u64 = value(flag, digits)?;
    n.checked_mul(unit)
        .ok_or_else(|| format!("{flag} {text} is too large"))
}

/// The options of `args` in order, each with its value: getopt_long's rules (`-pN`, `-p N`,
/// `--port=N`, `--port N`, `-dv` for two flags).
fn split(args: &[String]) -> Result<Vec<(&'static Spec, Option<String>)>, String> {
    let mut out = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let spec = SPECS
                .iter()
                .find(|s| s.long == name)
                .ok_or_else(|| format!("unknown option {arg:?}"))?;
            let value = match (spec.value, inline) {
                (None, Some(_)) => return Err(format!("option --{name} takes no value")),
                (None, None) => None,
                (Some(_), Some(v)) => Some(v),
                (Some(_), None) => Some(
                    args.next()
                        .cloned()
                        .ok_or_else(|| format!("option --{name} needs a value"))?,
                ),
            };
            out.push((spec, value));
            continue;
        }
        let letters = match arg.strip_prefix('-') {
            Some(l) if !l.is_empty() => l.as_bytes(),
            _ => return Err(format!("unexpected argument {arg:?}")),
        };
        for (i, &c) in letters.iter().enumerate() {
            let spec = SPECS
                .iter()
                .find(|s| s.short == Some(c))
                .ok_or_else(|| format!("unknown option -{}", c as char))?;
            if spec.value.is_none() {
                out.push((spec, None));
                continue;
            }
            let rest = &arg[1 + i + 1..];
            let value = if rest.is_empty() {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("option -{} needs a value", c as char))?
            } else {
                rest.to_owned()
            };
            out.push((spec, Some(value)));
            break;
        }
    }
    Ok(out)
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut o = Options {
        port: 11211,
        listen: vec!["127.0.0.1".to_owned()],
        threads: 4,
        max_connections: 1024,
        engine: String::new(),
        engine_config: None,
        engine_settings: Vec::new(),
        require_sasl: false,
        verbosity: 0,
        sasl_pwdb: std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from),
        auth_file: None,
        unix_socket: None,
        unix_mask: 0o700,
        reqs_per_event: 20,
        backlog: 1024,
        protocol: Protocol::Auto,
        idle_timeout: None,
        allow_shutdown: false,
        flush_enabled: true,
        dump_enabled: true,
        watch_enabled: true,
        daemonize: false,
        pid_file: None,
        user: None,
        lock_memory: false,
        coredumps: false,
        prefix_delimiter: None,
        extended: Vec::new(),
    };
    let mut engine = None;
    for (spec, text) in split(args)? {
        let flag = match spec.short {
            Some(c) => format!("-{}", c as char),
            None => format!("--{}", spec.long),
        };
        let text = text.unwrap_or_default();
        let mut setting = |key: &'static str, value: String| {
            o.engine_settings.retain(|(k, _)| *k != key);
            o.engine_settings.push((key, value));
        };
        match spec.opt {
            Opt::Help => return Ok(Parsed::Print(usage())),
            Opt::Version => {
                return Ok(Parsed::Print(format!(
                    "mcb-memcached {VERSION} (answers as memcached 1.6.18)"
                )))
            }
            Opt::License => {
                let license = env!("CARGO_PKG_LICENSE");
                return Ok(Parsed::Print(format!(
                    "mcb-memcached is licensed under {license} (see the LICENSE files of its \
                     source). It implements memcached's protocols; it contains no memcached code."
                )));
            }
            Opt::Port => o.port = value(&flag, &text)?,
            Opt::UdpPort => {
                let udp: u16 = value(&flag, &text)?;
                if udp != 0 {
                    return Err(format!(
                        "UDP is not supported (-U {udp}): give -U 0 (memcached 1.6's default)"
                    ));
                }
            }
            Opt::UnixSocket => o.unix_socket = Some(PathBuf::from(&text)),
            Opt::UnixMask => {
                o.unix_mask = u32::from_str_radix(&text, 8)
                    .ok()
                    .filter(|m| *m <= 0o777)
                    .ok_or_else(|| format!("invalid octal mask {text:?} for {flag}"))?
            }
            Opt::EnableShutdown => o.allow_shutdown = true,
            Opt::Listen => {
                o.listen = text
                    .split(',')
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect();
                if o.listen.is_empty() {
                    return Err(format!("{flag} needs an address"));
                }
            }
            Opt::Daemon => o.daemonize = true,
            Opt::Coredumps => o.coredumps = true,
            Opt::User => o.user = Some(text),
            Opt::MemoryLimit => {
                let mb: u64 = value(&flag, &text)?;
                let bytes = mb
                    .checked_mul(1 << 20)
                    .ok_or_else(|| format!("{flag} {text} is too large"))?;
                setting("cache_size", bytes.to_string());
            }
            Opt::DisableEvictions => setting("eviction", "false".into()),
            Opt::DisableCas => setting("use_cas", "false".into()),
            Opt::MaxItemSize => setting("item_size_max", size(&flag, &text)?.to_string()),
            Opt::GrowthFactor => setting("factor", value::<f64>(&flag, &text)?.to_string()),
            Opt::MinSize => setting("chunk_size", value::<u32>(&flag, &text)?.to_string()),
            Opt::LargePages => setting("preallocate", "true".into()),
            Opt::ConnLimit => {
                o.max_connections = value(&flag, &text)?;
                if o.max_connections == 0 {
                    return Err("-c needs at least one connection".into());
                }
            }
            Opt::LockMemory => o.lock_memory = true,
            Opt::Verbose => o.verbosity += 1,
            Opt::PidFile => o.pid_file = Some(PathBuf::from(&text)),
            Opt::Delimiter => match text.as_bytes() {
                [c] => o.prefix_delimiter = Some(*c),
                _ => return Err(format!("{flag} needs one character, not {text:?}")),
            },
            Opt::Threads => {
                o.threads = value(&flag, &text)?;
                if o.threads == 0 {
                    return Err("-t needs at least one thread".into());
                }
            }
            Opt::ReqsPerEvent => {
                o.reqs_per_event = value(&flag, &text)?;
                if o.reqs_per_event == 0 {
                    return Err("-R needs at least one request".into());
                }
            }
            Opt::Backlog => {
                o.backlog = value(&flag, &text)?;
                if o.backlog <= 0 {
                    return Err("-b needs a positive backlog".into());
                }
            }
            Opt::Protocol => {
                o.protocol = match text.as_str() {
                    "auto" => Protocol::Auto,
                    "binary" => Protocol::Binary,
                    "ascii" => Protocol::Ascii,
                    _ => return Err(format!("invalid protocol {text:?} for -B")),
                }
            }
            Opt::Sasl => o.require_sasl = true,
            Opt::DisableFlush => o.flush_enabled = false,
            Opt::DisableDumping => o.dump_enabled = false,
            Opt::DisableWatch => o.watch_enabled = false,
            Opt::AuthFile => o.auth_file = Some(PathBuf::from(&text)),
            Opt::EngineConfig => {
                if !text.contains('=') && text.contains('/') {
                    return Err(format!(
                        "-e {text:?}: -e is the engine configuration (key=value;...) here, as in \
                         memcached's engine branch; memcached 1.6's memory file is not supported"
                    ));
                }
                o.engine_config = Some(text);
            }
            Opt::Engine => engine = Some(text),
            Opt::MemoryFile => {
                return Err("--memory-file: a restartable cache is not supported".into())
            }
            Opt::Ssl => return Err("-Z: TLS is not supported".into()),
            Opt::Extended => {
                for e in extended::parse(&text)? {
                    if e.key == "idle_timeout" {
                        let secs: u64 = value("idle_timeout", e.value.as_deref().unwrap_or(""))?;
                        o.idle_timeout = (secs > 0).then(|| Duration::from_secs(secs));
                    }
                    o.extended.push(e);
                }
            }
            Opt::NapiIds => {
                value::<u32>(&flag, &text)?;
            }
            Opt::SaslPwdb => o.sasl_pwdb = Some(PathBuf::from(&text)),
        }
    }
    if o.require_sasl && o.protocol == Protocol::Ascii {
        // memcached 1.6's refusal: SASL is a binary-protocol exchange.
        return Err(
            "you cannot allow the ASCII protocol while using SASL (-S with -B ascii)".into(),
        );
    }
    let default_engine = engine.is_none();
    o.engine = engine.unwrap_or_else(|| DEFAULT_ENGINE.to_owned());
    if default_engine && o.engine_config.is_none() {
        o.engine_config = Some(
            std::env::var("MCB_DEFAULT_ENGINE_CONFIG")
                .unwrap_or_else(|_| DEFAULT_ENGINE_CONFIG.to_owned()),
        );
    }
    Ok(Parsed::Run(Box::new(o)))
}

impl Options {
    /// The host's settings under memcached's `stats settings` names, in its order: what
    /// `stats settings` reports (with the engine's between them, see `session`) and what
    /// `get_config` parses (as memcached's does).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let yes = |b: bool| if b { "yes" } else { "no" }.to_owned();
        let protocol = match self.protocol {
            Protocol::Auto => "auto-negotiate",
            Protocol::Binary => "binary",
            Protocol::Ascii => "ascii",
        };
        let socket = self.unix_socket.as_ref();
        let delimiter = self.prefix_delimiter.unwrap_or(b':');
        vec![
            ("maxconns", self.max_connections.to_string()),
            ("tcpport", self.port.to_string()),
            ("udpport", "0".to_owned()),
            ("inter", self.listen.join(",")),
            ("verbosity", self.verbosity.to_string()),
            (
                "domain_socket",
                socket.map_or("NULL".to_owned(), |p| p.display().to_string()),
            ),
            ("umask", format!("{:o}", self.unix_mask)),
            ("shutdown_command", yes(self.allow_shutdown)),
            ("num_threads", self.threads.to_string()),
            ("num_threads_per_udp", self.threads.to_string()),
            ("stat_key_prefix", char::from(delimiter).to_string()),
            ("reqs_per_event", self.reqs_per_event.to_string()),
            ("tcp_backlog", self.backlog.to_string()),
            ("binding_protocol", protocol.to_owned()),
            ("auth_enabled_sasl", yes(self.require_sasl)),
            ("auth_enabled_ascii", yes(self.auth_file.is_some())),
            ("maxconns_fast", "yes".to_owned()),
            ("flush_enabled", yes(self.flush_enabled)),
            ("dump_enabled", yes(self.dump_enabled)),
            (
                "idle_timeout",
                self.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
            ),
            ("track_sizes", "no".to_owned()),
            ("engine", self.engine.clone()),
        ]
    }

    /// The bucket engine's admin user, from its configuration's `admin=NAME`.
    pub fn admin(&self) -> Option<String> {
        let config = self.engine_config.as_deref()?;
        config
            .split(';')
            .find_map(|kv| kv.trim().strip_prefix("admin="))
            .map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, Options, Parsed, DEFAULT_ENGINE};
    use std::path::Path;

    fn run(args: &[&str]) -> Result<Options, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&args)? {
            Parsed::Run(o) => Ok(*o),
            Parsed::Print(text) => Err(text),
        }
    }

    #[test]
    fn memcached_spellings() {
        let o = run(&[
            "-p",
            "1234",
            "-l0.0.0.0",
            "-t",
            "8",
            "-c",
            "10",
            "-vv",
            "-v",
            "-S",
        ])
        .unwrap();
        assert_eq!(
            (o.port, o.listen.as_slice(), o.threads),
            (1234, &["0.0.0.0".to_owned()][..], 8)
        );
        assert_eq!(
            (o.max_connections, o.verbosity, o.require_sasl),
            (10, 3, true)
        );
        assert_eq!(o.engine, DEFAULT_ENGINE);
        assert!(DEFAULT_ENGINE.ends_with("/deps/libbucket_engine.so"));
        let o = run(&["-E", "/x.so", "-e", "a=b", "--sasl-pwdb=/pw"]).unwrap();
        assert_eq!(
            (o.engine.as_str(), o.engine_config.as_deref()),
            ("/x.so", Some("a=b"))
        );
        assert_eq!(o.sasl_pwdb.as_deref(), Some(Path::new("/pw")));
        let o = run(&[
            "-s",
            "/tmp/s",
            "-R5",
            "-b",
            "64",
            "-B",
            "binary",
            "-o",
            "idle_timeout=7",
        ])
        .unwrap();
        assert_eq!(o.unix_socket.as_deref(), Some(Path::new("/tmp/s")));
        assert_eq!((o.reqs_per_event, o.backlog), (5, 64));
        assert_eq!(o.protocol, super::Protocol::Binary);
        assert_eq!(o.idle_timeout, Some(std::time::Duration::from_secs(7)));
        // An explicit engine gets no default configuration.
        assert_eq!(run(&["-E", "/x.so"]).unwrap().engine_config, None);
    }

    #[test]
    fn long_forms_bundles_and_engine_settings() {
        let o = run(&[
            "--memory-limit=64",
            "--port",
            "11311",
            "-dA",
            "-u",
            "memcache",
            "-P/run/m.pid",
            "-I",
            "2m",
            "-M",
            "-C",
            "-n",
            "48",
            "-f",
            "1.25",
            "--listen=127.0.0.1,[::1]:11411",
            "-U",
            "0",
            "-a",
            "0770",
            "-o",
            "hashpower=20,lru_crawler",
        ])
        .unwrap();
        assert_eq!(o.port, 11311);
        assert!(o.daemonize && o.allow_shutdown);
        assert_eq!(o.user.as_deref(), Some("memcache"));
        assert_eq!(o.pid_file.as_deref(), Some(Path::new("/run/m.pid")));
        assert_eq!(o.listen, ["127.0.0.1", "[::1]:11411"]);
        assert_eq!(o.unix_mask, 0o770);
        let settings: Vec<(&str, &str)> = o
            .engine_settings
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        assert_eq!(
            settings,
            [
                ("cache_size", "67108864"),
                ("item_size_max", "2097152"),
                ("eviction", "false"),
                ("use_cas", "false"),
                ("chunk_size", "48"),
                ("factor", "1.25"),
            ]
        );
        let keys: Vec<&str> = o.extended.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["hashpower", "lru_crawler"]);
        assert!(run(&["-V"]).unwrap_err().starts_with("mcb-memcached "));
        assert!(run(&["--help"])
            .unwrap_err()
            .contains("--memory-limit=<num>"));
    }

    #[test]
    fn bad_options_are_errors() {
        for bad in [
            &["-p"][..],
            &["-p", "70000"],
            &["-p", "x"],
            &["-t", "0"],
            &["-c", "-1"],
            &["-q"],
            &["--nope"],
            &["--port"],
            &["--daemon=yes"],
            &["-B", "udp"],
            &["-o", "slab_reassign=1"],
            &["-o", "bogus"],
            &["-R", "0"],
            &["-b", "0"],
            &["extra"],
            &["-U", "11211"],
            &["-Z"],
            &["--memory-file=/dev/shm/m"],
            &["-e", "/dev/shm/m"],
            &["-S", "-B", "ascii"],
            &["-m", "lots"],
            &["-I", "2g"],
            &["-a", "999"],
            &["-D", "::"],
        ] {
            assert!(run(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
