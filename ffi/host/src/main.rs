//! mcb-memcached: a memcached server for engine interface v1 libraries (the library
//! `mcb_host` holds the server; this is its command line).
//!
//! Exit status: 0 after an engine-requested shutdown, 1 when the engine, the password file or
//! the listening socket fails, 2 for a bad command line.

use mcb_host::api::{self, server_core};
use mcb_host::options::{self, Options, Parsed};
use mcb_host::{engine, sasl, server, session};
use std::ffi::CString;
use std::net::TcpListener;
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

fn start(options: Options) -> Result<(), String> {
    api::init(api::Settings {
        verbosity: options.verbosity,
        config: settings(&options),
    });
    let pwdb = options
        .sasl_pwdb
        .as_deref()
        .map(sasl::Pwdb::load)
        .transpose()?;
    // SAFETY: the engine the operator named with `-E` (or the bucket engine built with us),
    // trusted as memcached trusts its `-E`; loaded once, after api::init, before the listener.
    let engine = unsafe { engine::load(&options.engine, options.engine_config.as_deref())? };
    let listener = TcpListener::bind((options.listen.as_str(), options.port))
        .map_err(|e| format!("cannot listen on {}:{}: {e}", options.listen, options.port))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    server_core::set_listener(&listener);
    // Tests and scripts wait for this line to learn the port.
    println!("mcb-memcached listening on {local}");
    let ctx = Box::leak(Box::new(session::Ctx {
        engine,
        pwdb,
        options,
        counters: session::Counters::default(),
        started: std::time::Instant::now(),
    }));
    server::run(listener, ctx).map_err(|e| format!("serving failed: {e}"))
}
