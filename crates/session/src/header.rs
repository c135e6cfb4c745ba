//! The first line of a JSON Lines log, `{"type":"session","version":0,"id","createdAt","cwd"}`.
//!
//! Guarantees: a header read from a file is kept verbatim (extra keys such as `delegationDepth`
//! included) and written back unchanged; only version 0 is accepted.

use serde_json::{Map, Value};

use dsh_core::Json;

use crate::deep;

/// The only log format version this crate reads and writes.
pub const LOG_VERSION: u64 = 0;

/// A session log header.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    json: Json,
}

impl Header {
    /// A new header for session `id`, created now, in `cwd`.
    pub fn new(id: &str, cwd: &str) -> Header {
        let created_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut m = Map::new();
        m.insert("type".into(), Value::from("session"));
        m.insert("version".into(), Value::from(LOG_VERSION));
        m.insert("id".into(), Value::from(id));
        m.insert("createdAt".into(), Value::from(created_at));
        m.insert("cwd".into(), Value::from(cwd));
        Header {
            json: Json::from_shallow(Value::Object(m)),
        }
    }

    /// Reads a header from a parsed first line.
    pub(crate) fn from_value(value: Value) -> Result<Header, HeaderError> {
        let Some(map) = value.as_object() else {
            return Err(HeaderError::NotHeader);
        };
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return Err(HeaderError::NotHeader);
        }
        match map.get("version") {
            Some(v) if v.as_u64() == Some(LOG_VERSION) => {}
            Some(v) => return Err(HeaderError::UnknownVersion(v.to_string())),
            None => return Err(HeaderError::UnknownVersion("(missing)".to_owned())),
        }
        if !map.get("id").is_some_and(Value::is_string) {
            return Err(HeaderError::NoId);
        }
        let json = Json::new(value).map_err(|e| HeaderError::Json(e.to_string()))?;
        Ok(Header { json })
    }

    /// Parses a header line.
    pub fn from_json_line(line: &str) -> Result<Header, HeaderError> {
        let mut header_error = None;
        let parsed = deep::parse_with(line, |value| match Header::from_value(value) {
            Ok(h) => Ok(h),
            Err(e) => {
                header_error = Some(e);
                Err(String::new())
            }
        });
        match (parsed, header_error) {
            (Ok(h), _) => Ok(h),
            (Err(_), Some(e)) => Err(e),
            (Err(m), None) => Err(HeaderError::Json(m)),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        self.json
            .value()
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `createdAt`, as written (milliseconds since the epoch in logs this crate creates).
    pub fn created_at(&self) -> Option<&Value> {
        self.json.value().get("createdAt")
    }

    /// `cwd`, if it is a string.
    pub fn cwd(&self) -> Option<&str> {
        self.json.value().get("cwd").and_then(Value::as_str)
    }

    /// The whole header, verbatim.
    pub fn json(&self) -> &Json {
        &self.json
    }

    /// The header as one compact JSON line (without the newline): the first line of a new log.
    pub fn to_json_line(&self) -> String {
        self.json.to_json_string()
    }

    /// The header as one JSON line with its newline.
    pub(crate) fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.json.to_json_string().as_bytes());
        out.push(b'\n');
    }
}

/// Why a first line is not a header this crate can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// Not `{"type":"session",...}`.
    #[error("the first line is not a session header (`{{\"type\":\"session\",...}}`)")]
    NotHeader,
    /// A version other than 0.
    #[error("unknown session log version {0} (this reader knows version 0)")]
    UnknownVersion(String),
    /// No string `id`.
    #[error("the session header has no string `id`")]
    NoId,
    /// Not JSON.
    #[error("{0}")]
    Json(String),
}
