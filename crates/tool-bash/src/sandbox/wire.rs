//! The messages between dsh and a session supervisor ([`super::serve`]), one per `SOCK_SEQPACKET`
//! datagram: fields of raw bytes, each a little-endian `u32` length and its bytes, the first
//! naming the message. A `run` request carries the command's stdout and stderr pipes as two
//! file descriptors (`SCM_RIGHTS`).
//!
//! dsh → supervisor: `run id cwd arg0 n k1 v1 .. kn vn argv..` (+ 2 fds), `done id` (its group
//! needs no more watching), `kill id` (kill its group, if it started).
//! supervisor → dsh: `ready deny-unix`, `fail reason`, `started id pid`, `spawn-failed id why`,
//! `exit id code signal` (an empty code or signal: none).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The largest message either side sends or reads (a longer command goes the per-call way).
pub const MAX_MESSAGE: usize = 128 * 1024;

/// Encodes `fields` as one message.
pub fn encode<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        let len = u32::try_from(f.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&f[..len as usize]);
    }
    out
}

/// Splits a message into its fields; `None` when it is malformed.
pub fn decode(mut msg: &[u8]) -> Option<Vec<&[u8]>> {
    let mut fields = Vec::new();
    while !msg.is_empty() {
        let (len, rest) = msg.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        if rest.len() < len {
            return None;
        }
        fields.push(&rest[..len]);
        msg = &rest[len..];
    }
    Some(fields)
}

/// A field as text (a number, a word).
pub fn text(field: &[u8]) -> Option<&str> {
    std::str::from_utf8(field).ok()
}

/// A field as a number.
pub fn number<T: std::str::FromStr>(field: &[u8]) -> Option<T> {
    text(field)?.parse().ok()
}

/// A field as an OS string.
pub fn os(field: &[u8]) -> OsString {
    OsString::from_vec(field.to_vec())
}

/// An OS string as a field.
pub fn field(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

/// One command for the supervisor to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// The call's number within the session.
    pub id: u64,
    /// Its working directory.
    pub cwd: OsString,
    /// The program's `argv[0]` (empty: the program as given).
    pub arg0: OsString,
    /// Variables set on top of the supervisor's environment.
    pub env: Vec<(OsString, OsString)>,
    /// The program and its arguments.
    pub argv: Vec<OsString>,
}

impl RunRequest {
    /// The message (without its descriptors).
    pub fn encode(&self) -> Vec<u8> {
        let id = self.id.to_string();
        let n = self.env.len().to_string();
        let mut fields: Vec<&[u8]> = vec![
            b"run",
            id.as_bytes(),
            field(&self.cwd),
            field(&self.arg0),
            n.as_bytes(),
        ];
        for (k, v) in &self.env {
            fields.push(field(k));
            fields.push(field(v));
        }
        fields.extend(self.argv.iter().map(|a| field(a)));
        encode(fields)
    }

    /// Reads the fields after `run`.
    pub fn decode(fields: &[&[u8]]) -> Option<RunRequest> {
        let [id, cwd, arg0, n, rest @ ..] = fields else {
            return None;
        };
        let n: usize = number(n)?;
        if rest.len() < n.checked_mul(2)? + 1 {
            return None;
        }
        let (env, argv) = rest.split_at(n * 2);
        Some(RunRequest {
            id: number(id)?,
            cwd: os(cwd),
            arg0: os(arg0),
            env: env.chunks(2).map(|kv| (os(kv[0]), os(kv[1]))).collect(),
            argv: argv.iter().map(|a| os(a)).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_request_round_trips() {
        let req = RunRequest {
            id: 7,
            cwd: "/w s".into(),
            arg0: "".into(),
            env: vec![("TMPDIR".into(), "/t".into()), ("E".into(), "".into())],
            argv: vec!["bash".into(), "-c".into(), "echo 'a\0b'".into()],
        };
        let msg = req.encode();
        let fields = decode(&msg).expect("fields");
        assert_eq!(fields[0], b"run");
        assert_eq!(RunRequest::decode(&fields[1..]), Some(req));
    }

    #[test]
    fn a_truncated_message_is_malformed() {
        let msg = encode([b"exit".as_slice(), b"12"]);
        assert!(decode(&msg[..msg.len() - 1]).is_none());
        assert!(RunRequest::decode(&[b"1", b"/", b"", b"2", b"K"]).is_none());
    }
}
