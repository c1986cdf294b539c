//! The bucket engine's settings, typed. Parsing memcached's config string belongs to `ffi`.

/// How the registry creates and assigns buckets (the seed's configuration keys).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Config {
    /// Engine spec (a library path in the C world) for the default bucket and for buckets
    /// created automatically (`engine`).
    pub engine: String,
    /// Load the unnamed default bucket that serves connections attached to no bucket
    /// (`default`).
    pub default_bucket: bool,
    /// Config string for the default bucket and for automatically created named buckets
    /// (`default_bucket_config`).
    pub default_bucket_config: String,
    /// Attach new connections to this named bucket instead of the unnamed one
    /// (`default_bucket_name`).
    pub default_bucket_name: Option<String>,
    /// Create the bucket a connection asks for when it does not exist (`auto_create`).
    pub auto_create: bool,
    /// The user allowed to run the admin commands (`admin`); nobody when `None`.
    pub admin: Option<String>,
}

impl Default for Config {
    /// The seed's defaults: no default bucket, auto-create on, no admin.
    fn default() -> Self {
        Self {
            engine: String::new(),
            default_bucket: false,
            default_bucket_config: String::new(),
            default_bucket_name: None,
            auto_create: true,
            admin: None,
        }
    }
}
