//! The bucket engine's configuration string, parsed with the host's `parse_config` (so its
//! grammar, escapes and `config_file=` are memcached's own), into the core's typed `Config`.

use super::host::Host;
use crate::abi::*;
use mcb_core::bucket::{name, Config};
use std::ffi::{c_char, CString};
use std::ptr;

/// A `DT_STRING` target: `parse_config` stores a `strdup`ed string we must free.
struct HostString(*mut c_char);

impl HostString {
    fn take(&mut self) -> Option<String> {
        let s = std::mem::replace(&mut self.0, ptr::null_mut());
        // SAFETY: NULL or a NUL-terminated string `parse_config` strdup'ed for us.
        let owned = unsafe { super::host::c_str(s) };
        // SAFETY: malloc'ed by the host's strdup; freed once (we nulled our copy).
        unsafe { libc::free(s.cast()) };
        owned
    }
}

impl Drop for HostString {
    fn drop(&mut self) {
        self.take();
    }
}

/// Parses the bucket engine's configuration (`engine`, `admin`, `default`,
/// `default_bucket_name`, `default_bucket_config`, `auto_create`, `config_file`). Unknown keys
/// and bad values are errors, with the reason.
pub(crate) fn parse(host: &Host, config: Option<&str>) -> Result<Config, String> {
    let mut out = Config::default();
    let Some(text) = config else {
        return Ok(out);
    };
    let text = CString::new(text).map_err(|_| "configuration holds a NUL byte".to_owned())?;
    let mut engine = HostString(ptr::null_mut());
    let mut admin = HostString(ptr::null_mut());
    let mut default_name = HostString(ptr::null_mut());
    let mut default_config = HostString(ptr::null_mut());
    let mut items = [
        config_item::new(
            c"engine",
            DT_STRING,
            config_value {
                dt_string: &mut engine.0,
            },
        ),
        config_item::new(
            c"admin",
            DT_STRING,
            config_value {
                dt_string: &mut admin.0,
            },
        ),
        config_item::new(
            c"default",
            DT_BOOL,
            config_value {
                dt_bool: &mut out.default_bucket,
            },
        ),
        config_item::new(
            c"default_bucket_name",
            DT_STRING,
            config_value {
                dt_string: &mut default_name.0,
            },
        ),
        config_item::new(
            c"default_bucket_config",
            DT_STRING,
            config_value {
                dt_string: &mut default_config.0,
            },
        ),
        config_item::new(
            c"auto_create",
            DT_BOOL,
            config_value {
                dt_bool: &mut out.auto_create,
            },
        ),
        config_item::new(
            c"config_file",
            DT_CONFIGFILE,
            config_value {
                dt_string: ptr::null_mut(),
            },
        ),
        config_item::END,
    ];
    // SAFETY: a NULL-key-terminated table whose value pointers point at live locals of the
    // item's datatype (config_file carries no value).
    let rc = unsafe { host.parse_config(&text, &mut items) };
    match rc {
        0 => {}
        1 => {
            return Err(format!(
                "unknown key in bucket engine configuration \"{}\"",
                text.to_string_lossy()
            ))
        }
        _ => {
            return Err(format!(
                "bad value in bucket engine configuration \"{}\"",
                text.to_string_lossy()
            ))
        }
    }
    out.engine = engine.take().unwrap_or_default();
    out.admin = admin.take();
    out.default_bucket_name = default_name.take();
    out.default_bucket_config = default_config.take().unwrap_or_default();
    if let Some(name) = &out.default_bucket_name {
        name::validate(name.as_bytes()).map_err(|e| format!("default_bucket_name: {e}"))?;
    }
    if (out.default_bucket || out.default_bucket_name.is_some()) && out.engine.is_empty() {
        return Err("a default bucket needs engine=PATH".into());
    }
    Ok(out)
}

/// `MEMCACHED_TOP_KEYS=N`: keys to track per bucket (0: topkeys off), as the seed reads it.
pub(crate) fn topkeys_from_env() -> usize {
    std::env::var("MEMCACHED_TOP_KEYS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// The `force` flag of a DELETE's body (`force=true|false`, parsed like any config).
pub(crate) fn parse_force(host: &Host, body: &[u8]) -> Result<bool, ()> {
    if body.is_empty() {
        return Ok(false);
    }
    let text = CString::new(body).map_err(|_| ())?;
    let mut force = false;
    let mut items = [
        config_item::new(
            c"force",
            DT_BOOL,
            config_value {
                dt_bool: &mut force,
            },
        ),
        config_item::END,
    ];
    // SAFETY: a NULL-key-terminated table pointing at a live bool.
    match unsafe { host.parse_config(&text, &mut items) } {
        0 => Ok(force),
        _ => Err(()),
    }
}
