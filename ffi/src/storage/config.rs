//! The storage engine's configuration string, parsed with the host's `parse_config` (so its
//! grammar, escapes and `config_file=` are memcached's own). The keys are those memcached's
//! default engine accepts; the ones our store has no use for (slab tuning, vbuckets, verbosity)
//! are accepted and ignored, and any other key fails `initialize`.

use super::host::HostApi;
use crate::abi::*;
use mcb_core::store::Config;
use std::ffi::CString;
use std::ptr;

/// Parses `config` (NULL: defaults).
pub(crate) fn parse(host: &HostApi, config: Option<&str>) -> Result<Config, String> {
    let mut out = Config::default();
    let Some(text) = config.filter(|t| !t.trim().is_empty()) else {
        return Ok(out);
    };
    let text = CString::new(text).map_err(|_| "configuration holds a NUL byte".to_owned())?;
    // Accepted and ignored (memcached's default engine uses them for its slabs and vbuckets).
    let (mut verbose, mut chunk_size) = (0usize, 0usize);
    let (mut preallocate, mut ignore_vbucket, mut vb0) = (false, false, false);
    let mut factor = 0f32;
    let bool_item =
        |key, target: &mut bool| config_item::new(key, DT_BOOL, config_value { dt_bool: target });
    let size_item =
        |key, target: &mut usize| config_item::new(key, DT_SIZE, config_value { dt_size: target });
    let mut items = [
        bool_item(c"use_cas", &mut out.use_cas),
        size_item(c"verbose", &mut verbose),
        bool_item(c"eviction", &mut out.eviction),
        size_item(c"cache_size", &mut out.cache_size),
        bool_item(c"preallocate", &mut preallocate),
        config_item::new(
            c"factor",
            DT_FLOAT,
            config_value {
                dt_float: &mut factor,
            },
        ),
        size_item(c"chunk_size", &mut chunk_size),
        size_item(c"item_size_max", &mut out.item_size_max),
        bool_item(c"ignore_vbucket", &mut ignore_vbucket),
        bool_item(c"vb0", &mut vb0),
        config_item::new(
            c"config_file",
            DT_CONFIGFILE,
            config_value {
                dt_string: ptr::null_mut(),
            },
        ),
        config_item::END,
    ];
    // SAFETY: a NULL-key-terminated table whose value pointers point at live locals of each
    // item's datatype (config_file carries none).
    let rc = unsafe { host.parse_config(&text, &mut items) };
    let shown = text.to_string_lossy();
    match rc {
        0 => Ok(out),
        1 => Err(format!(
            "unknown key in configuration \"{shown}\" (accepted: use_cas, verbose, eviction, \
             cache_size, preallocate, factor, chunk_size, item_size_max, ignore_vbucket, vb0, \
             config_file)"
        )),
        _ => Err(format!("bad value in configuration \"{shown}\"")),
    }
}
