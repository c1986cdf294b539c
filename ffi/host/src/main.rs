//! mcb-memcached: a memcached server for engine interface v1 libraries (the library
//! `mcb_host` holds the server; this is its command line).
//!
//! Exit status: 0 after SIGTERM, SIGINT or an engine-requested shutdown (the engine destroyed),
//! 1 when the engine, the password file or the listening socket fails, 2 for a bad command
//! line.

use mcb_abi::abi::EXTENSION_LOG_INFO;
use mcb_host::api::extension::log;
use mcb_host::counters::Registry;
use mcb_host::options::{self, Options, Parsed};
use mcb_host::server::Listener;
use mcb_host::{engine, sasl, server, server_handle, session};
use std::ffi::CString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match options::parse(&args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            println!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("mcb-memcached: {why}\n{}", options::USAGE);
            return ExitCode::from(2);
        }
    };
    match start(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("mcb-memcached: {why}");
            ExitCode::from(1)
        }
    }
}

/// The host's settings as `get_config` parses them: `key=value;...`, with `;`, `=` and `\\`
/// in values escaped.
fn settings(o: &Options) -> CString {
    let mut text = String::new();
    for (key, value) in o.settings() {
        text.push_str(key);
        text.push('=');
        for c in value.chars() {
            if matches!(c, ';' | '=' | '\\') {
                text.push('\\');
            }
            text.push(c);
        }
        text.push(';');
    }
    CString::new(text).unwrap_or_default()
}

/// Raises the soft descriptor limit toward what `-c` connections need (as far as the hard
/// limit allows), as memcached does.
fn raise_fd_limit(connections: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let want = (connections as libc::rlim_t + 64).min(limit.rlim_max);
    if want > limit.rlim_cur {
        limit.rlim_cur = want;
        // SAFETY: a live in-parameter; failing leaves the limit as it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

fn start(options: Options) -> Result<(), String> {
    server_handle::init(server_handle::Settings {
        verbosity: options.verbosity,
        config: settings(&options),
    });
    if options.require_sasl && options.sasl_pwdb.is_none() {
        return Err(
            "-S requires a SASL password file (--sasl-pwdb PATH or $MEMCACHED_SASL_PWDB)".into(),
        );
    }
    let pwdb = options
        .sasl_pwdb
        .as_deref()
        .map(sasl::Pwdb::load)
        .transpose()?;
    raise_fd_limit(options.max_connections);
    // SAFETY: the engine the operator named with `-E` (or the bucket engine built with us),
    // trusted as memcached trusts its `-E`; loaded once, after server_handle::init, before the
    // listener.
    let engine = unsafe { engine::load(&options.engine, options.engine_config.as_deref())? };
    let listener = Listener::bind(
        &options.listen,
        options.port,
        options.unix_socket.as_deref(),
        options.backlog,
    )?;
    let signals = server::catch_signals().map_err(|e| format!("cannot catch signals: {e}"))?;
    // Tests and scripts wait for this line to learn the port.
    println!("mcb-memcached listening on {}", listener.describe());
    let ctx = Box::leak(Box::new(session::Ctx {
        engine,
        pwdb,
        admin: options.admin(),
        counters: Registry::new(options.threads as usize),
        options,
        connections: session::Connections::default(),
        started: std::time::Instant::now(),
    }));
    server::run(listener, signals, ctx).map_err(|e| format!("serving failed: {e}"))?;
    engine.destroy();
    log(EXTENSION_LOG_INFO, "stopped: the engine is destroyed");
    Ok(())
}
