//! The server's `parse_config`, with memcached's grammar: `key=value` pairs separated by `;`,
//! whitespace around keys and values trimmed, a backslash making the next character literal
//! (so `\;`, `\=`, `\\` and a kept trailing `\ `), keys shorter than 80 bytes and values shorter
//! than 1024. A `config_file=PATH` item reads more pairs from a file, a set per line, skipping
//! lines that start with `#`. Returns 0, -1 on a bad value (parsing stops at once), or 1 when an
//! unknown key was seen (the rest is still parsed). A string value is `strdup`ed with libc so
//! that the engine can `free` it.

use mcb_abi::abi::*;
use std::ffi::{c_char, c_int, CStr, CString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

/// Longest key plus one (memcached's buffer size).
const MAX_KEY: usize = 80;
/// Longest value plus one.
const MAX_VALUE: usize = 1024;
/// How deep `config_file` may nest (a file naming itself would otherwise never end).
const MAX_FILE_DEPTH: usize = 8;

/// Where the parser's complaints go: the caller's `FILE *`, or nowhere when it passed NULL.
struct Complaints(*mut libc::FILE);

impl Complaints {
    fn say(&self, message: std::fmt::Arguments<'_>) {
        if self.0.is_null() {
            return;
        }
        let mut text = Vec::with_capacity(128);
        let _ = text.write_fmt(message);
        text.push(b'\n');
        // SAFETY: a non-NULL stream the caller handed to parse_config, and our own buffer.
        unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), self.0) };
    }
}

/// The caller's table, ending with a NULL key.
struct Table {
    items: *mut config_item,
    len: usize,
}

impl Table {
    /// # Safety
    /// `items` points at a `config_item` array ending with an item whose key is NULL, and each
    /// key is NULL or NUL-terminated.
    unsafe fn new(items: *mut config_item) -> Table {
        let mut len = 0;
        // SAFETY: the caller's contract: the array ends with a NULL key.
        while !unsafe { (*items.add(len)).key }.is_null() {
            len += 1;
        }
        Table { items, len }
    }

    fn find(&mut self, key: &[u8]) -> Option<&mut config_item> {
        (0..self.len)
            // SAFETY: `i < len`, inside the array `new` measured; no other reference to it is
            // alive while the parser runs.
            .map(|i| unsafe { &mut *self.items.add(i) })
            // SAFETY: keys before the terminator are non-NULL and NUL-terminated (`new`).
            .find(|item| unsafe { CStr::from_ptr(item.key) }.to_bytes() == key)
    }
}

/// `SERVER_CORE_API::parse_config`.
///
/// # Safety
/// `text` is NULL or NUL-terminated; `items` is NULL or a table as in `Table::new` whose
/// value pointers point at live storage of each item's datatype; `error` is NULL or a stream.
pub unsafe extern "C" fn parse_config(
    text: *const c_char,
    items: *mut config_item,
    error: *mut libc::FILE,
) -> c_int {
    mcb_abi::boundary::guard(-1, || {
        if text.is_null() || items.is_null() {
            return -1;
        }
        // SAFETY: the caller's contract (NUL-terminated text, a NULL-terminated table).
        let (text, mut table) = unsafe { (CStr::from_ptr(text), Table::new(items)) };
        parse(text.to_bytes(), &mut table, &Complaints(error), 0)
    })
}

/// Reads one token starting at `*pos`: leading whitespace skipped, a backslash makes the next
/// byte literal, stops at an unescaped `stop` (left at `*pos`) or the end, trailing unescaped
/// whitespace dropped. `None` when it would not fit in `limit` bytes.
fn token(text: &[u8], pos: &mut usize, stop: u8, limit: usize) -> Option<Vec<u8>> {
    let mut p = *pos;
    while p < text.len() && text[p].is_ascii_whitespace() {
        p += 1;
    }
    let mut out = Vec::new();
    let mut keep = 0;
    while p < text.len() && text[p] != stop {
        let (byte, escaped) = match (text[p], text.get(p + 1)) {
            (b'\\', Some(&next)) => {
                p += 1;
                (next, true)
            }
            (byte, _) => (byte, false),
        };
        if out.len() + 1 >= limit {
            return None;
        }
        out.push(byte);
        if escaped || !byte.is_ascii_whitespace() {
            keep = out.len();
        }
        p += 1;
    }
    out.truncate(keep);
    *pos = p;
    Some(out)
}

/// A key and its value, unescaped.
type Pair = (Vec<u8>, Vec<u8>);

/// The next `key=value` pair from `*pos` (after its `;`), `Ok(None)` at the end, or the
/// complaint that stops parsing.
fn next_pair(text: &[u8], pos: &mut usize) -> Result<Option<Pair>, String> {
    while *pos < text.len() && text[*pos].is_ascii_whitespace() {
        *pos += 1;
    }
    if *pos == text.len() {
        return Ok(None);
    }
    let Some(key) = token(text, pos, b'=', MAX_KEY) else {
        return Err(format!(
            "ERROR: Invalid key, starting at: <{}>",
            show(&text[*pos..])
        ));
    };
    if text.get(*pos) != Some(&b'=') {
        return Err(format!("ERROR: Missing '=' after key: <{}>", show(&key)));
    }
    *pos += 1;
    let Some(value) = token(text, pos, b';', MAX_VALUE) else {
        return Err(format!(
            "ERROR: Invalid value, starting at: <{}>",
            show(&text[*pos..])
        ));
    };
    if text.get(*pos) == Some(&b';') {
        *pos += 1;
    }
    Ok(Some((key, value)))
}

fn parse(text: &[u8], table: &mut Table, complain: &Complaints, depth: usize) -> c_int {
    let mut ret = 0;
    let mut pos = 0;
    loop {
        let (key, value) = match next_pair(text, &mut pos) {
            Ok(Some(pair)) => pair,
            Ok(None) => return ret,
            Err(why) => {
                complain.say(format_args!("{why}"));
                return -1;
            }
        };
        let Some(item) = table.find(&key) else {
            complain.say(format_args!("Unsupported key: <{}>", show(&key)));
            ret = 1;
            continue;
        };
        if item.found {
            complain.say(format_args!(
                "WARNING: Found duplicate entry for \"{}\"",
                show(&key)
            ));
        }
        let datatype = item.datatype;
        if datatype == DT_CONFIGFILE {
            match read_file(&value, table, complain, depth) {
                -1 => return -1,
                0 => {}
                r => ret = r,
            }
            // The file's own items were marked; the config_file item itself is found too.
            if let Some(item) = table.find(&key) {
                item.found = true;
            }
            continue;
        }
        // SAFETY: the caller's contract: the value pointer of each item points at live storage
        // of its datatype.
        if !unsafe { store(item, &value) } {
            complain.say(format_args!(
                "Invalid entry, Key: <{}> Value: <{}>",
                show(&key),
                show(&value)
            ));
            return -1;
        }
        item.found = true;
    }
}

/// Converts `value` to the item's datatype and writes it; false for a bad value (or an unknown
/// datatype).
///
/// # Safety
/// The item's value pointer points at live storage of its datatype.
unsafe fn store(item: &mut config_item, value: &[u8]) -> bool {
    let text = std::str::from_utf8(value).unwrap_or("");
    match item.datatype {
        DT_SIZE => match parse_size(text) {
            // SAFETY: a DT_SIZE item's `dt_size` points at a size_t (the caller's contract).
            Some(v) => unsafe { *item.value.dt_size = v },
            None => return false,
        },
        #[cfg(not(feature = "engine-pu"))]
        DT_SSIZE => match parse_ssize(text) {
            // SAFETY: as above, an ssize_t.
            Some(v) => unsafe { *item.value.dt_ssize = v },
            None => return false,
        },
        DT_FLOAT => match text.parse::<f32>() {
            // SAFETY: as above, a float.
            Ok(v) if !text.is_empty() => unsafe { *item.value.dt_float = v },
            _ => return false,
        },
        DT_BOOL => {
            let v = if ["true", "on"].iter().any(|t| t.eq_ignore_ascii_case(text)) {
                true
            } else if ["false", "off"]
                .iter()
                .any(|t| t.eq_ignore_ascii_case(text))
            {
                false
            } else {
                return false;
            };
            // SAFETY: as above, a bool.
            unsafe { *item.value.dt_bool = v };
        }
        DT_STRING => {
            let Ok(owned) = CString::new(value) else {
                return false;
            };
            // SAFETY: a NUL-terminated string; the copy is malloc'ed, for the engine to free.
            let copy = unsafe { libc::strdup(owned.as_ptr()) };
            if copy.is_null() {
                return false;
            }
            // SAFETY: as above, a char *.
            unsafe { *item.value.dt_string = copy };
        }
        _ => return false,
    }
    true
}

/// A size: decimal digits with an optional k/m/g/t suffix (any case; powers of 1024).
fn parse_size(text: &str) -> Option<usize> {
    let (digits, shift) = match text.as_bytes().last()?.to_ascii_lowercase() {
        b'k' => (&text[..text.len() - 1], 10),
        b'm' => (&text[..text.len() - 1], 20),
        b'g' => (&text[..text.len() - 1], 30),
        b't' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    let v = v.checked_mul(1u64 << shift)?;
    usize::try_from(v).ok()
}

/// A signed size (v2.5.1's DT_SSIZE): an optional minus sign, then a size.
#[cfg(not(feature = "engine-pu"))]
fn parse_ssize(text: &str) -> Option<libc::ssize_t> {
    match text.strip_prefix('-') {
        Some(rest) => libc::ssize_t::try_from(parse_size(rest)?).ok().map(|v| -v),
        None => libc::ssize_t::try_from(parse_size(text)?).ok(),
    }
}

/// `config_file=PATH`: more pairs from a file, a set per line, `#` lines skipped.
fn read_file(path: &[u8], table: &mut Table, complain: &Complaints, depth: usize) -> c_int {
    if depth >= MAX_FILE_DEPTH {
        complain.say(format_args!(
            "ERROR: config_file nested too deeply at: {}",
            show(path)
        ));
        return -1;
    }
    let Ok(contents) = std::fs::read(std::ffi::OsStr::from_bytes(path)) else {
        complain.say(format_args!("ERROR: Failed to open file: {}", show(path)));
        return -1;
    };
    let mut ret = 0;
    for line in contents.split(|&b| b == b'\n') {
        if line.first() == Some(&b'#') {
            continue;
        }
        match parse(line, table, complain, depth + 1) {
            -1 => return -1,
            0 => {}
            r => ret = r,
        }
    }
    ret
}

/// Bytes for a message.
fn show(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// A configuration's `key=value` pairs, as `parse_config` reads them (values unescaped;
/// `config_file` items are pairs like any other).
pub fn pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let (text, mut pos, mut out) = (text.as_bytes(), 0, Vec::new());
    while let Some((key, value)) = next_pair(text, &mut pos)? {
        let utf8 = |b: Vec<u8>| String::from_utf8(b).map_err(|_| "a configuration is UTF-8");
        out.push((utf8(key)?, utf8(value)?));
    }
    Ok(out)
}

/// Pairs as a configuration `parse_config` reads back: `;`, `=` and `\` in keys and values
/// escaped.
pub fn join<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    let mut text = String::new();
    for (key, value) in pairs {
        for (part, end) in [(key.as_ref(), '='), (value.as_ref(), ';')] {
            for c in part.chars() {
                if matches!(c, ';' | '=' | '\\') {
                    text.push('\\');
                }
                text.push(c);
            }
            text.push(end);
        }
    }
    text
}

/// The bucket engine's key holding the configuration of its default bucket (and of the buckets
/// it creates on connect).
const DEFAULT_BUCKET_CONFIG: &str = "default_bucket_config";

/// The configuration to initialize the engine with: `config` (`-e`, or the default) with the
/// engine keys the command line gave in memcached's spelling (`-m` as `cache_size`, ...) added:
/// into the bucket engine's `default_bucket_config` when `config` is the bucket engine's (it
/// names an `engine=`), else into `config` itself, as memcached's engine branch hands them to
/// its engine. A key given both ways is an error (which one was meant cannot be told).
pub fn engine_config(
    config: Option<&str>,
    settings: &[(&'static str, String)],
) -> Result<Option<String>, String> {
    if settings.is_empty() {
        return Ok(config.map(str::to_owned));
    }
    let mut outer = pairs(config.unwrap_or(""))?;
    let bucket_engine = outer.iter().any(|(k, _)| k == "engine");
    let inner = if bucket_engine {
        let at = match outer.iter().position(|(k, _)| k == DEFAULT_BUCKET_CONFIG) {
            Some(at) => at,
            None => {
                outer.push((DEFAULT_BUCKET_CONFIG.to_owned(), String::new()));
                outer.len() - 1
            }
        };
        Some((at, pairs(&outer[at].1)?))
    } else {
        None
    };
    let mut target = match &inner {
        Some((_, pairs)) => pairs.clone(),
        None => outer.clone(),
    };
    for (key, value) in settings {
        if let Some((_, given)) = target.iter().find(|(k, _)| k == key) {
            let option = crate::options::engine_option(key);
            return Err(format!(
                "the engine's {key} is given twice: by {option} ({value}) and in the engine \
                 configuration ({key}={given}); give it once"
            ));
        }
        target.push(((*key).to_owned(), value.clone()));
    }
    Ok(Some(match inner {
        Some((at, _)) => {
            outer[at].1 = join(&target);
            join(&outer)
        }
        None => join(&target),
    }))
}

#[cfg(test)]
mod engine_config_tests {
    use super::{engine_config, join, pairs};

    #[test]
    fn pairs_and_join_round_trip() {
        let text = r"engine=builtin;default_bucket_config=cache_size\=1m\;use_cas\=false; a = b ;";
        let p = pairs(text).unwrap();
        assert_eq!(
            p,
            [
                ("engine".into(), "builtin".into()),
                (
                    "default_bucket_config".into(),
                    "cache_size=1m;use_cas=false".into()
                ),
                ("a".into(), "b".into())
            ]
        );
        assert_eq!(pairs(&join(&p)).unwrap(), p);
        assert!(pairs("novalue").is_err());
    }

    #[test]
    fn memcached_options_go_to_the_default_bucket_or_the_engine() {
        let m = [("cache_size", "67108864".to_owned())];
        let bucket = engine_config(Some("engine=builtin;default=true"), &m).unwrap();
        let p = pairs(bucket.as_deref().unwrap()).unwrap();
        assert_eq!(p[2].0, "default_bucket_config");
        assert_eq!(
            pairs(&p[2].1).unwrap(),
            [("cache_size".into(), "67108864".into())]
        );
        let direct = engine_config(Some("verbose=true"), &m).unwrap();
        assert_eq!(direct.as_deref(), Some("verbose=true;cache_size=67108864;"));
        assert_eq!(
            engine_config(None, &m).unwrap().as_deref(),
            Some("cache_size=67108864;")
        );
        assert_eq!(
            engine_config(Some("x=1"), &[]).unwrap().as_deref(),
            Some("x=1")
        );
        // Both ways: an error naming both.
        let twice = engine_config(
            Some(r"engine=builtin;default_bucket_config=cache_size\=1m"),
            &m,
        );
        assert!(twice.unwrap_err().contains("-m (67108864)"));
        assert!(engine_config(Some("cache_size=1m"), &m).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_config;
    use mcb_abi::abi::*;
    use std::ffi::{c_char, CStr, CString};
    use std::ptr;

    /// The values a test table writes to.
    struct Values {
        size: usize,
        ratio: f32,
        verbose: bool,
        name: *mut c_char,
        unused: *mut c_char,
    }

    impl Values {
        fn new() -> Values {
            Values {
                size: 0,
                ratio: 0.0,
                verbose: false,
                name: ptr::null_mut(),
                unused: ptr::null_mut(),
            }
        }

        fn name(&self) -> Option<String> {
            if self.name.is_null() {
                return None;
            }
            // SAFETY: a string parse_config strdup'ed.
            let name = unsafe { CStr::from_ptr(self.name) };
            Some(name.to_string_lossy().into_owned())
        }
    }

    impl Drop for Values {
        fn drop(&mut self) {
            // SAFETY: NULL or malloc'ed by parse_config's strdup.
            unsafe { libc::free(self.name.cast()) };
        }
    }

    fn item(key: &'static CStr, datatype: config_datatype, value: config_value) -> config_item {
        config_item {
            key: key.as_ptr(),
            datatype,
            value,
            found: false,
        }
    }

    /// Parses `text` into a fresh table; the return code, the values and which items were
    /// found (cache_size, ratio, verbose, name, config_file).
    fn parse(text: &str) -> (i32, Values, [bool; 5]) {
        let mut v = Values::new();
        let rc;
        let found;
        {
            let mut items = [
                item(
                    c"cache_size",
                    DT_SIZE,
                    config_value {
                        dt_size: &mut v.size,
                    },
                ),
                item(
                    c"ratio",
                    DT_FLOAT,
                    config_value {
                        dt_float: &mut v.ratio,
                    },
                ),
                item(
                    c"verbose",
                    DT_BOOL,
                    config_value {
                        dt_bool: &mut v.verbose,
                    },
                ),
                item(
                    c"name",
                    DT_STRING,
                    config_value {
                        dt_string: &mut v.name,
                    },
                ),
                item(
                    c"config_file",
                    DT_CONFIGFILE,
                    config_value {
                        dt_string: &mut v.unused,
                    },
                ),
                item(
                    c"",
                    DT_SIZE,
                    config_value {
                        dt_size: ptr::null_mut(),
                    },
                ),
            ];
            items[5].key = ptr::null();
            let text = CString::new(text).unwrap();
            // SAFETY: a NUL-terminated text and a NULL-terminated table of live values.
            rc = unsafe { parse_config(text.as_ptr(), items.as_mut_ptr(), ptr::null_mut()) };
            found = [0, 1, 2, 3, 4].map(|i| items[i].found);
        }
        (rc, v, found)
    }

    #[test]
    fn every_type() {
        let (rc, v, found) = parse("cache_size=2k;ratio=1.5;verbose=on;name=bucket one");
        assert_eq!(rc, 0);
        assert_eq!((v.size, v.ratio, v.verbose), (2048, 1.5, true));
        assert_eq!(v.name().as_deref(), Some("bucket one"));
        assert_eq!(found, [true, true, true, true, false]);
    }

    #[test]
    fn size_suffixes_are_powers_of_1024() {
        for (text, want) in [
            ("0", 0usize),
            ("1024", 1024),
            ("3K", 3 << 10),
            ("3m", 3 << 20),
            ("2G", 2 << 30),
            ("1t", 1 << 40),
        ] {
            let (rc, v, _) = parse(&format!("cache_size={text}"));
            assert_eq!((rc, v.size), (0, want), "{text}");
        }
    }

    #[test]
    fn bools_in_any_case() {
        for (text, want) in [
            ("true", true),
            ("ON", true),
            ("False", false),
            ("off", false),
        ] {
            let (rc, v, _) = parse(&format!("verbose=true;verbose={text}"));
            assert_eq!((rc, v.verbose), (0, want), "{text}");
        }
    }

    #[test]
    fn whitespace_is_trimmed_and_backslash_escapes() {
        let (rc, v, _) = parse("  cache_size = 10 ;\tname =  a\\;b\\=c\\\\d\\  ; ");
        assert_eq!((rc, v.size), (0, 10));
        assert_eq!(v.name().as_deref(), Some("a;b=c\\d "));
        let (rc, v, _) = parse("name=x;");
        assert_eq!((rc, v.name().as_deref()), (0, Some("x")));
        assert_eq!(parse("").0, 0);
        assert_eq!(parse("   ").0, 0);
    }

    #[test]
    fn bad_values_stop_with_minus_one() {
        for text in [
            "cache_size=abc",
            "cache_size=-1",
            "cache_size=10x",
            "cache_size=",
            "cache_size=k",
            "cache_size=99999999999999999999",
            "cache_size=17179869184t",
            "ratio=fast",
            "ratio=",
            "verbose=yes",
            "name",
            "cache_size=1;verbose",
        ] {
            assert_eq!(parse(text).0, -1, "{text:?}");
        }
        // An empty key is just a key nobody asked for.
        assert_eq!(parse("=value").0, 1);
        // Parsing stops at the bad value.
        let (rc, v, _) = parse("verbose=maybe;cache_size=5");
        assert_eq!((rc, v.size), (-1, 0));
    }

    #[test]
    fn keys_and_values_have_memcached_limits() {
        assert_eq!(
            parse(&format!("{}=1", "k".repeat(79))).0,
            1,
            "a long unknown key"
        );
        assert_eq!(parse(&format!("{}=1", "k".repeat(80))).0, -1);
        assert_eq!(parse(&format!("name={}", "v".repeat(1023))).0, 0);
        assert_eq!(parse(&format!("name={}", "v".repeat(1024))).0, -1);
    }

    #[test]
    fn unknown_keys_return_one_and_parsing_goes_on() {
        let (rc, v, found) = parse("nosuch=1;cache_size=7");
        assert_eq!((rc, v.size), (1, 7));
        assert!(found[0]);
    }

    #[test]
    fn config_files_add_pairs_and_skip_comments() {
        let dir = std::env::temp_dir().join(format!("mcb-host-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("engine.conf");
        std::fs::write(
            &file,
            "# a comment=ignored\ncache_size=5k\nname=from file;verbose=true\n\n",
        )
        .unwrap();
        let (rc, v, found) = parse(&format!("ratio=2;config_file={}", file.display()));
        assert_eq!(rc, 0);
        assert_eq!((v.size, v.ratio, v.verbose), (5 << 10, 2.0, true));
        assert_eq!(v.name().as_deref(), Some("from file"));
        assert!(found[4], "config_file is found too");
        // An unknown key in the file is reported as such; a bad value fails.
        std::fs::write(&file, "other=1\ncache_size=3\n").unwrap();
        let (rc, v, _) = parse(&format!("config_file={}", file.display()));
        assert_eq!((rc, v.size), (1, 3));
        std::fs::write(&file, "cache_size=big\n").unwrap();
        assert_eq!(parse(&format!("config_file={}", file.display())).0, -1);
        // A missing file, and a file including itself, fail.
        assert_eq!(parse("config_file=/nonexistent/mcb.conf").0, -1);
        std::fs::write(&file, format!("config_file={}\n", file.display())).unwrap();
        assert_eq!(parse(&format!("config_file={}", file.display())).0, -1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn complaints_go_to_the_error_stream_and_null_arguments_fail() {
        // SAFETY: a temporary stream we close below.
        let stream = unsafe { libc::tmpfile() };
        assert!(!stream.is_null());
        let mut size = 0usize;
        let mut items = [
            item(c"cache_size", DT_SIZE, config_value { dt_size: &mut size }),
            item(
                c"",
                DT_SIZE,
                config_value {
                    dt_size: ptr::null_mut(),
                },
            ),
        ];
        items[1].key = ptr::null();
        let text = c"bogus=1;cache_size=4";
        // SAFETY: a NUL-terminated text, a NULL-terminated table, a live stream.
        let rc = unsafe { parse_config(text.as_ptr(), items.as_mut_ptr(), stream) };
        assert_eq!((rc, size), (1, 4));
        let mut buf = [0u8; 256];
        // SAFETY: our stream and buffer.
        let n = unsafe {
            libc::rewind(stream);
            let n = libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), stream);
            libc::fclose(stream);
            n
        };
        let said = String::from_utf8_lossy(&buf[..n]);
        assert!(said.contains("Unsupported key: <bogus>"), "{said}");
        // SAFETY: NULL arguments are refused before any use.
        unsafe {
            assert_eq!(
                parse_config(ptr::null(), items.as_mut_ptr(), ptr::null_mut()),
                -1
            );
            assert_eq!(
                parse_config(text.as_ptr(), ptr::null_mut(), ptr::null_mut()),
                -1
            );
        }
    }
}
