//! SASL PLAIN against a password file in memcached 2.x's format: one user a line, `user
//! password`, optionally followed by the user's configuration (handed to engines as
//! `auth_data_t::config`); blank lines and lines starting with `#` are skipped. And memcached
//! 1.6's ASCII authentication file (`-Y`): `user:password` lines.

use std::collections::HashMap;

/// The one mechanism offered.
pub const MECHANISMS: &[u8] = b"PLAIN";

#[derive(Debug)]
struct Entry {
    password: Vec<u8>,
    config: Option<String>,
}

/// The users of the password file.
#[derive(Debug, Default)]
pub struct Pwdb {
    users: HashMap<Vec<u8>, Entry>,
}

impl Pwdb {
    /// Reads the file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Pwdb, String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the SASL password file {}: {e}", path.display()))?;
        Ok(Pwdb::parse(&text))
    }

    /// Reads memcached 1.6's `-Y` file at `path`: `user:password` a line (the password is the
    /// rest of the line), blank lines skipped.
    pub fn load_auth_file(path: &std::path::Path) -> Result<Pwdb, String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the auth file {}: {e}", path.display()))?;
        let mut users = HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (user, password) = (&line[..colon], &line[colon + 1..]);
            if !user.is_empty() && !password.is_empty() {
                let password = password.to_vec();
                users.insert(
                    user.to_vec(),
                    Entry {
                        password,
                        config: None,
                    },
                );
            }
        }
        Ok(Pwdb { users })
    }

    fn parse(text: &[u8]) -> Pwdb {
        let mut users = HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.first() == Some(&b'#') {
                continue;
            }
            let (user, rest) = field(line);
            let (password, rest) = field(rest);
            if user.is_empty() || password.is_empty() {
                continue;
            }
            let config = String::from_utf8_lossy(rest).trim().to_owned();
            let config = (!config.is_empty()).then_some(config);
            users.insert(
                user.to_vec(),
                Entry {
                    password: password.to_vec(),
                    config,
                },
            );
        }
        Pwdb { users }
    }

    /// Checks a PLAIN message (`authzid NUL authcid NUL password`); on success the user and
    /// their configuration.
    pub fn plain(&self, message: &[u8]) -> Option<(String, Option<String>)> {
        let mut parts = message.splitn(3, |&b| b == 0);
        let (Some(authzid), Some(user), Some(password)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        // No proxy authorization: the identity asked for must be the one authenticated.
        if !authzid.is_empty() && authzid != user {
            return None;
        }
        self.check(user, password)
    }

    /// Checks `user`'s `password`; on success the user and their configuration.
    pub fn check(&self, user: &[u8], password: &[u8]) -> Option<(String, Option<String>)> {
        let entry = self.users.get(user)?;
        if !same(&entry.password, password) {
            return None;
        }
        let user = String::from_utf8(user.to_vec()).ok()?;
        Some((user, entry.config.clone()))
    }
}

/// The first whitespace-separated field of `text`, and what follows it.
fn field(text: &[u8]) -> (&[u8], &[u8]) {
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(text.len());
    let text = &text[start..];
    let end = text
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(text.len());
    text.split_at(end)
}

/// Compares two secrets in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::Pwdb;

    #[test]
    fn plain_checks_user_and_password() {
        let db = Pwdb::parse(b"# users\nalice secret\nbob  hunter2 quota=5\n\nbroken\n");
        assert_eq!(db.plain(b"\0alice\0secret"), Some(("alice".into(), None)));
        assert_eq!(
            db.plain(b"bob\0bob\0hunter2"),
            Some(("bob".into(), Some("quota=5".into())))
        );
        assert_eq!(db.plain(b"\0alice\0wrong"), None);
        assert_eq!(db.plain(b"\0alice\0secre"), None);
        assert_eq!(db.plain(b"\0carol\0secret"), None);
        assert_eq!(db.plain(b"\0broken\0"), None);
        assert_eq!(db.plain(b"alice"), None);
        assert_eq!(
            db.plain(b"bob\0alice\0secret"),
            None,
            "authzid is not authcid"
        );
    }
}
