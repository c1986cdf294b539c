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
  -t N             worker threads (accepted for memcached's command line and reported in
                   stats; each connection has its own thread, see -c)
  -c N             most simultaneous connections (default 1024)
  -E PATH          engine library (default: the libbucket_engine.so cargo built
                   with this binary, in target/<profile>/deps/)
  -e CONFIG        engine configuration (default with the bucket engine:
                   $MCB_DEFAULT_ENGINE_CONFIG or \"engine=builtin;default=true\")
  -S               require SASL authentication (binary protocol)
  -v               more verbose (repeat: -vv, -vvv)
  --sasl-pwdb PATH SASL password file, one \"user password\" a line
                   (default: $MEMCACHED_SASL_PWDB)
  -h, --help       this text";

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
}

impl Options {
    /// The host's settings under memcached's `stats settings` names: what `stats settings`
    /// reports and what `get_config` parses (as memcached's does).
    pub fn settings(&self) -> [(&'static str, String); 7] {
        let sasl = if self.require_sasl { "yes" } else { "no" };
        [
            ("maxconns", self.max_connections.to_string()),
            ("tcpport", self.port.to_string()),
            ("inter", self.listen.clone()),
            ("verbosity", self.verbosity.to_string()),
            ("num_threads", self.threads.to_string()),
            ("auth_enabled_sasl", sasl.to_owned()),
            ("engine", self.engine.clone()),
        ]
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
            "-p" | "-l" | "-t" | "-c" | "-E" | "-e" | "--sasl-pwdb"
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
            &["extra"],
        ] {
            assert!(run(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(run(&["--help"]).unwrap_err(), "help");
    }
}
