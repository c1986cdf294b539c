//! memcached 1.6's extended options (`-o key[=value],...`): each key memcached 1.6.18 knows has
//! its meaning here, or is accepted and ignored with the reason (it tunes a part of memcached
//! that this server does not have), or is refused with the reason (honouring it silently would
//! change what the operator asked for). A key memcached does not know is an error.

/// What a known key does here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// The host honours it ([`super::Options`] holds it).
    Applied,
    /// Accepted and ignored, for this reason.
    Ignored(&'static str),
    /// Refused, for this reason.
    Refused(&'static str),
}

const NO_SLABS: &str = "the storage engine has no slab allocator";
const NO_LRU: &str = "the storage engine evicts by S3-FIFO, without memcached's LRU threads";
const NO_CRAWLER: &str =
    "no LRU crawler: expired items are taken back when touched and by the SCRUB command";
const NO_HASH: &str = "the storage engine sizes and hashes its own table";
const NO_WATCH: &str = "no log streams (watch)";
const BUFFERS: &str = "buffers are bounded per connection (input grows with what arrives, \
                       output stops at 64 KiB queued)";
const NO_EXTSTORE: &str = "external storage (extstore) is not supported";
const NO_TLS: &str = "TLS is not supported";

/// memcached 1.6.18's keys: whether they take a value, and their meaning here.
const KEYS: &[(&str, bool, Meaning)] = &[
    ("idle_timeout", true, Meaning::Applied),
    (
        "track_sizes",
        false,
        Meaning::Ignored("item sizes are not tracked (`stats sizes` says disabled)"),
    ),
    ("maxconns_fast", false, Meaning::Applied),
    (
        "no_maxconns_fast",
        false,
        Meaning::Ignored("connections over -c are always closed at once"),
    ),
    ("read_buf_mem_limit", true, Meaning::Ignored(BUFFERS)),
    ("resp_obj_mem_limit", true, Meaning::Ignored(BUFFERS)),
    ("hashpower", true, Meaning::Ignored(NO_HASH)),
    ("hash_algorithm", true, Meaning::Ignored(NO_HASH)),
    ("no_hashexpand", false, Meaning::Ignored(NO_HASH)),
    (
        "tail_repair_time",
        true,
        Meaning::Ignored("items are never stuck at an LRU tail"),
    ),
    ("lru_crawler", false, Meaning::Ignored(NO_CRAWLER)),
    ("no_lru_crawler", false, Meaning::Ignored(NO_CRAWLER)),
    ("lru_crawler_sleep", true, Meaning::Ignored(NO_CRAWLER)),
    ("lru_crawler_tocrawl", true, Meaning::Ignored(NO_CRAWLER)),
    ("lru_maintainer", false, Meaning::Ignored(NO_LRU)),
    ("no_lru_maintainer", false, Meaning::Ignored(NO_LRU)),
    ("hot_lru_pct", true, Meaning::Ignored(NO_LRU)),
    ("warm_lru_pct", true, Meaning::Ignored(NO_LRU)),
    ("hot_max_factor", true, Meaning::Ignored(NO_LRU)),
    ("warm_max_factor", true, Meaning::Ignored(NO_LRU)),
    ("temporary_ttl", true, Meaning::Ignored(NO_LRU)),
    ("slab_reassign", false, Meaning::Ignored(NO_SLABS)),
    ("no_slab_reassign", false, Meaning::Ignored(NO_SLABS)),
    ("slab_automove", true, Meaning::Ignored(NO_SLABS)),
    ("no_slab_automove", false, Meaning::Ignored(NO_SLABS)),
    ("slab_automove_ratio", true, Meaning::Ignored(NO_SLABS)),
    ("slab_automove_window", true, Meaning::Ignored(NO_SLABS)),
    ("slab_automove_freeratio", true, Meaning::Ignored(NO_SLABS)),
    ("slab_chunk_max", true, Meaning::Ignored(NO_SLABS)),
    ("slab_sizes", true, Meaning::Ignored(NO_SLABS)),
    ("no_chunked_items", false, Meaning::Ignored(NO_SLABS)),
    ("watcher_logbuf_size", true, Meaning::Ignored(NO_WATCH)),
    ("worker_logbuf_size", true, Meaning::Ignored(NO_WATCH)),
    (
        "modern",
        false,
        Meaning::Ignored("memcached's future defaults: nothing to change here"),
    ),
    (
        "no_modern",
        false,
        Meaning::Ignored("memcached 1.4's defaults: nothing to change here"),
    ),
    (
        "inline_ascii_resp",
        false,
        Meaning::Ignored("a memcached 1.5 memory layout"),
    ),
    (
        "no_inline_ascii_resp",
        false,
        Meaning::Ignored("a memcached 1.5 memory layout"),
    ),
    (
        "drop_privileges",
        false,
        Meaning::Ignored("no seccomp sandbox; -u drops root"),
    ),
    (
        "no_drop_privileges",
        false,
        Meaning::Ignored("no seccomp sandbox; -u drops root"),
    ),
    (
        "sock_cookie_id",
        true,
        Meaning::Refused("sockets are not marked (SO_MARK) here"),
    ),
    (
        "num_napi_ids",
        true,
        Meaning::Ignored("connections are not grouped by NAPI id"),
    ),
];

/// The prefixes of memcached's extstore and TLS keys (`ext_path`, `ssl_key`, ...): refused.
const REFUSED_PREFIXES: &[(&str, &str)] = &[("ext_", NO_EXTSTORE), ("ssl_", NO_TLS)];

/// One `-o` key as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extended {
    pub key: String,
    pub value: Option<String>,
    pub meaning: Meaning,
}

/// Reads one `-o` argument (`key[=value],...`); refused and unknown keys are errors.
pub fn parse(text: &str) -> Result<Vec<Extended>, String> {
    let mut out = Vec::new();
    for sub in text.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = match sub.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (sub, None),
        };
        let meaning = match KEYS.iter().find(|(k, ..)| *k == key) {
            Some(&(_, takes_value, meaning)) => {
                match (takes_value, value) {
                    (true, None | Some("")) => {
                        return Err(format!("-o {key} needs a value ({key}=...)"))
                    }
                    (false, Some(_)) => return Err(format!("-o {key} takes no value")),
                    _ => {}
                }
                meaning
            }
            None => match REFUSED_PREFIXES.iter().find(|(p, _)| key.starts_with(p)) {
                Some(&(_, why)) => Meaning::Refused(why),
                None => return Err(format!("unknown -o option {key:?}")),
            },
        };
        if let Meaning::Refused(why) = meaning {
            return Err(format!("-o {key}: {why}"));
        }
        out.push(Extended {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            meaning,
        });
    }
    Ok(out)
}

/// The `-h` lines for the keys.
pub fn usage() -> String {
    let mut text = String::new();
    for (key, takes_value, meaning) in KEYS {
        let shown = if *takes_value {
            format!("{key}=N")
        } else {
            (*key).to_owned()
        };
        let what = match meaning {
            Meaning::Applied => match *key {
                "idle_timeout" => "close connections making no progress for N seconds".into(),
                _ => "as memcached (connections over -c are closed at once)".into(),
            },
            Meaning::Ignored(why) => format!("ignored: {why}"),
            Meaning::Refused(why) => format!("refused: {why}"),
        };
        text.push_str(&format!("    {shown:<26} {what}\n"));
    }
    text.push_str("    ext_*, ssl_*               refused: ");
    text.push_str(NO_EXTSTORE);
    text.push_str("; ");
    text.push_str(NO_TLS);
    text
}

#[cfg(test)]
mod tests {
    use crate::options::extended::{parse, Meaning};

    #[test]
    fn keys_are_applied_ignored_or_refused() {
        let keys = parse("idle_timeout=5,hashpower=20,,lru_crawler").unwrap();
        let got: Vec<(&str, Option<&str>, bool)> = keys
            .iter()
            .map(|e| {
                (
                    e.key.as_str(),
                    e.value.as_deref(),
                    e.meaning == Meaning::Applied,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("idle_timeout", Some("5"), true),
                ("hashpower", Some("20"), false),
                ("lru_crawler", None, false)
            ]
        );
        for bad in [
            "bogus",
            "idle_timeout",
            "idle_timeout=",
            "lru_crawler=1",
            "ext_path=/x:1G",
            "ssl_key=k",
            "sock_cookie_id=1",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }
}
