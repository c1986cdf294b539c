//! mcb-memcached: a memcached server for engine interface v1 libraries (the library
//! `mcb_host` holds the server; this is its command line).
//!
//! Exit status: 0 after SIGTERM, SIGINT, `shutdown` (with `-A`) or an engine-requested
//! shutdown (the engine destroyed), 1 when the engine, a password file, the user to become or
//! the listening socket fails, 2 for a bad command line.

use mcb_abi::abi::{EXTENSION_LOG_INFO, EXTENSION_LOG_WARNING};
use mcb_host::api::extension::log;
use mcb_host::counters::Registry;
use mcb_host::options::{self, Options, Parsed};
use mcb_host::{config, engine, process, sasl, server, server_handle, session};
use std::ffi::CString;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match options::parse(&args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Print(text)) => {
            // A closed stdout (`mcb-memcached -h | head`) is no failure.
            let _ = writeln!(std::io::stdout(), "{text}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("mcb-memcached: {why}\n(mcb-memcached -h lists the options)");
            return ExitCode::from(2);
        }
    };
    match start(*options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("mcb-memcached: {why}");
            ExitCode::from(1)
        }
    }
}

/// The host's settings as `get_config` parses them.
fn settings(o: &Options) -> CString {
    CString::new(config::join(&o.settings())).unwrap_or_default()
}

/// A password file, read now (before the privilege drop, as memcached reads its own).
fn passwords(
    path: Option<&std::path::Path>,
    parse: fn(&std::path::Path) -> Result<sasl::Pwdb, String>,
) -> Result<Option<sasl::Pwdb>, String> {
    path.map(parse).transpose()
}

fn start(mut options: Options) -> Result<(), String> {
    server_handle::init(server_handle::Settings {
        verbosity: options.verbosity,
        config: settings(&options),
    });
    if options.require_sasl && options.sasl_pwdb.is_none() {
        return Err(
            "-S requires a SASL password file (--sasl-pwdb PATH or $MEMCACHED_SASL_PWDB)".into(),
        );
    }
    options.engine_config =
        config::engine_config(options.engine_config.as_deref(), &options.engine_settings)?;
    let pwdb = passwords(options.sasl_pwdb.as_deref(), sasl::Pwdb::load)?;
    let ascii_users = passwords(options.auth_file.as_deref(), sasl::Pwdb::load_auth_file)?;
    process::raise_fd_limit(options.max_connections);
    if options.coredumps {
        process::enable_coredumps()?;
    }
    process::drop_privileges(options.user.as_deref())?;
    // Before any thread exists (the engine may start some).
    let daemon = options
        .daemonize
        .then(|| process::daemonize(options.verbosity > 0))
        .transpose()?;
    if options.lock_memory {
        if let Err(why) = process::lock_memory() {
            log(EXTENSION_LOG_WARNING, &why);
        }
    }
    // SAFETY: the engine the operator named with `-E` (or the bucket engine built with us),
    // trusted as memcached trusts its `-E`; loaded once, after server_handle::init, before the
    // listener.
    let engine = unsafe { engine::load(&options.engine, options.engine_config.as_deref())? };
    let listeners = server::bind_all(&options)?;
    let signals = server::catch_signals().map_err(|e| format!("cannot catch signals: {e}"))?;
    let pid_file =
        options
            .pid_file
            .as_deref()
            .and_then(|path| match process::PidFile::write(path) {
                Ok(file) => Some(file),
                Err(why) => {
                    // As memcached: said, and the server still starts.
                    log(EXTENSION_LOG_WARNING, &why);
                    None
                }
            });
    // Tests and scripts wait for this line to learn the port.
    let listening: Vec<String> = listeners.iter().map(server::Listener::describe).collect();
    let _ = writeln!(
        std::io::stdout(),
        "mcb-memcached listening on {}",
        listening.join(", ")
    );
    if let Some(daemon) = daemon {
        daemon.ready();
    }
    let ctx = Box::leak(Box::new(session::Ctx {
        engine,
        pwdb,
        ascii_users,
        admin: options.admin(),
        counters: Registry::new(options.threads as usize, options.prefix_delimiter.is_some()),
        options,
        connections: session::Connections::default(),
        started: std::time::Instant::now(),
        listening: listeners.iter().map(|l| (l.fd(), l.address())).collect(),
    }));
    server::run(listeners, signals, ctx).map_err(|e| format!("serving failed: {e}"))?;
    engine.destroy();
    drop(pid_file);
    log(EXTENSION_LOG_INFO, "stopped: the engine is destroyed");
    Ok(())
}
