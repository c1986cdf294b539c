//! The command line, in memcached's spelling where memcached has the option.

use std::path::PathBuf;

/// The bucket engine's configuration when neither `-E` nor `-e` is given: the built-in storage
/// engine as the default bucket. `MCB_DEFAULT_ENGINE_CONFIG` replaces it (e.g. to serve an
/// external engine as the default bucket: `engine=/abs/path/lib.so;default=true`).
pub const DEFAULT_ENGINE_CONFIG: &str = "engine=builtin;default=true";

/// The engine when `-E` is not given: the `libbucket_engine.so` that the cargo invocation which
/// built this binary built too (its exact path, recorded by build.rs).
pub const DEFAULT_ENGINE: &str = env!("MCB_BUCKET_ENGINE");

pub const USAGE: &str = "\
usage: mcb-memcached [options]
  -p PORT          TCP port to listen on (default 11211; 0 picks a free one)
  -l ADDR          address to listen on (default 127.0.0.1)
  -s PATH          listen on this unix-domain socket instead of TCP
  -t N             worker threads, each an event loop over its connections (default 4)
  -c N             most simultaneous connections (default 1024)
  -R N             most requests one connection runs before the others get a turn
                   (default 20)
  -b N             listen backlog (default 1024)
  -B PROTO         binary, ascii or auto (default auto: the first byte decides)
  -o idle_timeout=SECONDS
                   close connections idle that long (default 0: never)
  -E PATH          engine library (default: the libbucket_engine.so cargo built
                   with this binary, in target/<profile>/deps/)
  -e CONFIG        engine configuration (default with the bucket engine:
                   $MCB_DEFAULT_ENGINE_CONFIG or \"engine=builtin;default=true\")
  -S               require SASL authentication (binary protocol)
  -v               more verbose (repeat: -vv, -vvv)
  --sasl-pwdb PATH SASL password file, one \"user password\" a line
                   (default: $MEMCACHED_SASL_PWDB)
  -h, --help       this text";

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
    pub listen: String,
    pub threads: u32,
    pub max_connections: usize,
    pub engine: String,
    pub engine_config: Option<String>,
    pub require_sasl: bool,
    pub verbosity: u32,
    pub sasl_pwdb: Option<PathBuf>,
    pub unix_socket: Option<PathBuf>,
    pub reqs_per_event: usize,
    pub backlog: i32,
    pub protocol: Protocol,
    pub idle_timeout: Option<std::time::Duration>,
}

impl Options {
    /// The host's settings under memcached's `stats settings` names: what `stats settings`
    /// reports and what `get_config` parses (as memcached's does).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let sasl = if self.require_sasl { "yes" } else { "no" };
        let protocol = match self.protocol {
            Protocol::Auto => "auto-negotiate",
            Protocol::Binary => "binary",
            Protocol::Ascii => "ascii",
        };
        let socket = self.unix_socket.as_ref();
        vec![
            ("maxconns", self.max_connections.to_string()),
            ("tcpport", self.port.to_string()),
            ("inter", self.listen.clone()),
            ("verbosity", self.verbosity.to_string()),
            ("num_threads", self.threads.to_string()),
            ("reqs_per_event", self.reqs_per_event.to_string()),
            ("tcp_backlog", self.backlog.to_string()),
            ("binding_protocol", protocol.to_owned()),
            (
                "domain_socket",
                socket.map_or("NULL".to_owned(), |p| p.display().to_string()),
            ),
            (
                "idle_timeout",
                self.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
            ),
            ("auth_enabled_sasl", sasl.to_owned()),
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

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    Run(Options),
    Help,
}

fn value<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("invalid value {text:?} for {flag}"))
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut port = 11211;
    let mut listen = "127.0.0.1".to_owned();
    let mut threads = 4;
    let mut max_connections = 1024;
    let mut engine = None;
    let mut engine_config = None;
    let mut require_sasl = false;
    let mut verbosity = 0;
    let mut sasl_pwdb = std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from);
    let mut unix_socket = None;
    let mut reqs_per_event = 20;
    let mut backlog = 1024;
    let mut protocol = Protocol::Auto;
    let mut idle_timeout = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_str();
        if arg == "-h" || arg == "--help" {
            return Ok(Parsed::Help);
        }
        if arg == "-S" {
            require_sasl = true;
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') && arg[1..].bytes().all(|b| b == b'v') {
            verbosity += arg.len() as u32 - 1;
            continue;
        }
        // Options with a value: `-p 11211` or `-p11211`; `--sasl-pwdb PATH` or `=PATH`.
        let (flag, inline) = if let Some(rest) = arg.strip_prefix("--sasl-pwdb") {
            match rest.strip_prefix('=') {
                Some(v) => ("--sasl-pwdb", Some(v)),
                None if rest.is_empty() => ("--sasl-pwdb", None),
                None => return Err(format!("unknown option {arg:?}")),
            }
        } else if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") {
            (&arg[..2], Some(&arg[2..]))
        } else {
            (arg, None)
        };
        if !matches!(
            flag,
            "-p" | "-l"
                | "-t"
                | "-c"
                | "-E"
                | "-e"
                | "-s"
                | "-R"
                | "-b"
                | "-B"
                | "-o"
                | "--sasl-pwdb"
        ) {
            return Err(format!("unknown option {arg:?}"));
        }
        let text = match inline {
            Some(v) => v,
            None => args
                .next()
                .ok_or_else(|| format!("option {flag} needs a value"))?,
        };
        match flag {
            "-p" => port = value(flag, text)?,
            "-l" => listen = text.to_owned(),
            "-t" => {
                threads = value(flag, text)?;
                if threads == 0 {
                    return Err("-t needs at least one thread".into());
                }
            }
            "-c" => {
                max_connections = value(flag, text)?;
                if max_connections == 0 {
                    return Err("-c needs at least one connection".into());
                }
            }
            "-s" => unix_socket = Some(PathBuf::from(text)),
            "-R" => {
                reqs_per_event = value(flag, text)?;
                if reqs_per_event == 0 {
                    return Err("-R needs at least one request".into());
                }
            }
            "-b" => {
                backlog = value(flag, text)?;
                if backlog <= 0 {
                    return Err("-b needs a positive backlog".into());
                }
            }
            "-B" => {
                protocol = match text {
                    "auto" => Protocol::Auto,
                    "binary" => Protocol::Binary,
                    "ascii" => Protocol::Ascii,
                    _ => return Err(format!("invalid protocol {text:?} for -B")),
                }
            }
            "-o" => {
                for sub in text.split(',') {
                    match sub.split_once('=') {
                        Some(("idle_timeout", secs)) => {
                            let secs: u64 = value("idle_timeout", secs)?;
                            idle_timeout = (secs > 0).then(|| std::time::Duration::from_secs(secs));
                        }
                        _ => return Err(format!("unknown -o option {sub:?}")),
                    }
                }
            }
            "-E" => engine = Some(text.to_owned()),
            "-e" => engine_config = Some(text.to_owned()),
            _ => sasl_pwdb = Some(PathBuf::from(text)),
        }
    }
    let default_engine = engine.is_none();
    let engine = engine.unwrap_or_else(|| DEFAULT_ENGINE.to_owned());
    if default_engine && engine_config.is_none() {
        engine_config = Some(
            std::env::var("MCB_DEFAULT_ENGINE_CONFIG")
                .unwrap_or_else(|_| DEFAULT_ENGINE_CONFIG.to_owned()),
        );
    }
    Ok(Parsed::Run(Options {
        port,
        listen,
        threads,
        max_connections,
        engine,
        engine_config,
        require_sasl,
        verbosity,
        sasl_pwdb,
        unix_socket,
        reqs_per_event,
        backlog,
        protocol,
        idle_timeout,
    }))
}

#[cfg(test)]
mod tests {
    use super::{parse, Parsed, DEFAULT_ENGINE};
    use std::path::Path;

    fn run(args: &[&str]) -> Result<super::Options, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&args)? {
            Parsed::Run(o) => Ok(o),
            Parsed::Help => Err("help".into()),
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
        assert_eq!((o.port, o.listen.as_str(), o.threads), (1234, "0.0.0.0", 8));
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
    fn bad_options_are_errors() {
        for bad in [
            &["-p"][..],
            &["-p", "70000"],
            &["-p", "x"],
            &["-t", "0"],
            &["-c", "-1"],
            &["-q"],
            &["--nope"],
            &["-B", "udp"],
            &["-o", "slab_reassign"],
            &["-R", "0"],
            &["-b", "0"],
            &["extra"],
        ] {
            assert!(run(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(run(&["--help"]).unwrap_err(), "help");
    }
}
