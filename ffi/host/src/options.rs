//! The command line, in memcached's spelling where memcached has the option.

use std::path::{Path, PathBuf};

/// The bucket engine's configuration when neither `-E` nor `-e` is given: the built-in storage
/// engine as the default bucket. `MCB_DEFAULT_ENGINE_CONFIG` overrides it (until the built-in
/// engine exists, point it at an external engine: `engine=/abs/path/lib.so;default=true`).
pub const DEFAULT_ENGINE_CONFIG: &str = "engine=builtin;default=true";

/// libbucket_engine.so next to this binary, or in `deps/` beside it (where cargo puts it when it
/// builds it as this crate's dependency, e.g. for `cargo run -p mcb-host`): the newer of the two,
/// so that a copy left by an older `cargo build` does not shadow a fresh one.
fn default_engine_path(exe_dir: &Path) -> String {
    let candidates = [
        exe_dir.join("libbucket_engine.so"),
        exe_dir.join("deps/libbucket_engine.so"),
    ];
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let newest = candidates
        .iter()
        .filter_map(|p| Some((modified(p)?, p)))
        .max_by_key(|(time, _)| *time)
        .map_or(&candidates[0], |(_, p)| p);
    newest.to_string_lossy().into_owned()
}

pub const USAGE: &str = "\
usage: mcb-memcached [options]
  -p PORT          TCP port to listen on (default 11211; 0 picks a free one)
  -l ADDR          address to listen on (default 127.0.0.1)
  -t N             worker threads (accepted for memcached's command line and reported in
                   stats; each connection has its own thread, see -c)
  -c N             most simultaneous connections (default 1024)
  -E PATH          engine library (default: libbucket_engine.so next to this binary,
                   or in deps/ beside it)
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

/// Parses `args` (without the program name). `exe_dir` is where the default engine lives.
pub fn parse(args: &[String], exe_dir: &Path) -> Result<Parsed, String> {
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
    let engine = engine.unwrap_or_else(|| default_engine_path(exe_dir));
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
    use super::{parse, Parsed};
    use std::path::Path;

    fn run(args: &[&str]) -> Result<super::Options, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&args, Path::new("/opt/mcb"))? {
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
        assert_eq!(o.engine, "/opt/mcb/libbucket_engine.so");
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
