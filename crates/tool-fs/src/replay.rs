//! Rebuilding observations from a session log (spec FS3): every successful `read`, `write` and
//! `edit` result's `meta` carries `observed: {path, version}` beside the reference's own keys,
//! and [`observation_from_meta`] turns it back into the pair the policy records.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::intent::Observation;
use crate::version::FileVersion;

/// The `observed` entry a tool puts in its result meta.
pub(crate) fn observed_meta(path: &std::path::Path, version: &FileVersion) -> Value {
    json!({"path": path.to_string_lossy(), "version": version.to_string()})
}

/// The observation a tool result's `meta` records, if it records one.
pub fn observation_from_meta(meta: &Value) -> Option<(PathBuf, Observation)> {
    let o = meta.get("observed")?;
    let path = o.get("path")?.as_str()?;
    let version: FileVersion = o.get("version")?.as_str()?.parse().ok()?;
    Some((PathBuf::from(path), Observation::Present(version)))
}
