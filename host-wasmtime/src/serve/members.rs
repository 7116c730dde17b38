//! Members and their bearer tokens. Tokens are kept only as SHA-256 hashes
//! (a members file never holds a usable secret); a request's token is hashed
//! and compared in constant time with every member's hash.

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{HostError, Result};

/// One member: an id and the SHA-256 (hex) of their bearer token.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Member {
    /// The member id conversations are owned by.
    pub id: String,
    /// Lowercase hex SHA-256 of the bearer token.
    pub token_sha256: String,
}

/// The members a server accepts.
#[derive(Debug, Clone, Default)]
pub struct Members {
    members: Vec<(String, [u8; 32])>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    members: Vec<Member>,
}

/// The SHA-256 (lowercase hex) of a token, as a members file stores it.
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn unhex(id: &str, hex: &str) -> Result<[u8; 32]> {
    let bad = || {
        HostError::Input(format!(
            "member {id:?}: tokenSha256 must be 64 lowercase hex digits (see `foldline hash-token`)"
        ))
    };
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

impl Members {
    /// Parse a members file: `{"members": [{"id": "alice", "tokenSha256": "…"}]}`.
    ///
    /// # Errors
    /// `invalid_input` naming the member at fault; an empty list; a repeated id.
    pub fn parse(text: &str) -> Result<Members> {
        let f: File = serde_json::from_str(text)
            .map_err(|e| HostError::Input(format!("members file: {e}")))?;
        if f.members.is_empty() {
            return Err(HostError::Input(
                "members file: no members, so no request could ever be served".into(),
            ));
        }
        let mut members: Vec<(String, [u8; 32])> = Vec::new();
        for m in f.members {
            if m.id.is_empty() || members.iter().any(|(id, _)| *id == m.id) {
                return Err(HostError::Input(format!(
                    "members file: member id {:?} is empty or repeated",
                    m.id
                )));
            }
            let h = unhex(&m.id, &m.token_sha256)?;
            members.push((m.id, h));
        }
        Ok(Members { members })
    }

    /// Whether `id` is a member of this server.
    pub fn contains(&self, id: &str) -> bool {
        self.members.iter().any(|(m, _)| m == id)
    }

    /// The member a bearer token belongs to.
    pub fn authenticate(&self, token: &str) -> Option<&str> {
        let h: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        // Every hash is compared in full, so timing says nothing about which
        // member (if any) nearly matched.
        for (id, stored) in &self.members {
            let diff = stored
                .iter()
                .zip(h.iter())
                .fold(0u8, |d, (a, b)| d | (a ^ b));
            if diff == 0 {
                found = Some(id.as_str());
            }
        }
        found
    }
}

/// Read the members file at `path` again each time the process gets
/// `SIGHUP` (Unix; elsewhere, nothing) and give the server what it lists. A
/// file that does not parse is logged and the members stay as they were.
/// The signal is taken here (within the runtime), before the future runs:
/// a `SIGHUP` from then on no longer ends the process.
pub fn reload_on_hangup(
    server: std::sync::Arc<super::Server>,
    path: std::path::PathBuf,
) -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    #[cfg(not(unix))]
    let hangups: Option<()> = None;
    async move {
        #[cfg(unix)]
        if let Some(mut hangups) = hangups {
            while hangups.recv().await.is_some() {
                reload(&server, &path);
            }
        }
        #[cfg(not(unix))]
        let _ = (server, path, hangups);
    }
}

/// Give `server` the members the file at `path` lists, or log why not.
fn reload(server: &super::Server, path: &std::path::Path) {
    let read = std::fs::read_to_string(path)
        .map_err(|e| HostError::Input(format!("{}: {e}", path.display())))
        .and_then(|text| Members::parse(&text));
    match read {
        Ok(members) => {
            let n = members.members.len();
            server.set_members(members);
            eprintln!("foldline serve: {} read again: {n} members", path.display());
        }
        Err(e) => eprintln!(
            "foldline serve: {} not read again, the members stay as they were: {e}",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_authenticates_only_its_member() {
        let text = format!(
            r#"{{"members":[{{"id":"alice","tokenSha256":"{}"}},{{"id":"bob","tokenSha256":"{}"}}]}}"#,
            hash_token("a-secret"),
            hash_token("b-secret")
        );
        let m = Members::parse(&text).unwrap();
        assert_eq!(m.authenticate("a-secret"), Some("alice"));
        assert_eq!(m.authenticate("b-secret"), Some("bob"));
        assert_eq!(m.authenticate("a-secreT"), None);
        assert_eq!(m.authenticate(""), None);
    }

    #[test]
    fn a_members_file_with_a_plain_token_or_a_repeated_id_is_refused() {
        let plain = r#"{"members":[{"id":"alice","tokenSha256":"hunter2"}]}"#;
        assert_eq!(Members::parse(plain).unwrap_err().code(), "invalid_input");
        let h = hash_token("x");
        let twice = format!(
            r#"{{"members":[{{"id":"a","tokenSha256":"{h}"}},{{"id":"a","tokenSha256":"{h}"}}]}}"#
        );
        assert_eq!(Members::parse(&twice).unwrap_err().code(), "invalid_input");
        assert_eq!(
            Members::parse(r#"{"members":[]}"#).unwrap_err().code(),
            "invalid_input"
        );
    }
}
