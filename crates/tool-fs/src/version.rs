//! `FileVersion`: the compare-and-set basis of a file. It changes whenever the file's identity
//! (device, inode) or content (size, modification and change times in nanoseconds, and a 64-bit
//! XXH3 hash of the bytes, for timestamps too coarse to see a quick rewrite) changes.
//!
//! Its text form (`1:<dev>:<ino>:<size>:<mtime_ns>:<ctime_ns>:<hash hex>`) is stable across
//! processes and releases, so versions recorded in a session log can be compared after a resume.

use std::fmt;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of a file's bytes and identity.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FileVersion {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    hash: u64,
}

/// A version text that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed file version \"{0}\"")]
pub struct VersionParseError(pub String);

impl FileVersion {
    /// The version of a file whose metadata (from `fstat` of the open file) is `meta` and whose
    /// bytes are `bytes`.
    pub fn of(meta: &Metadata, bytes: &[u8]) -> FileVersion {
        FileVersion::with_hash(meta, content_hash(bytes))
    }

    /// The version from metadata and an already computed content hash.
    pub(crate) fn with_hash(meta: &Metadata, hash: u64) -> FileVersion {
        FileVersion {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            hash,
        }
    }

    /// The content hash part.
    pub fn content_hash(&self) -> u64 {
        self.hash
    }

    /// The size part.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// The content hash a [`FileVersion`] carries (XXH3, 64 bits).
pub fn content_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

impl fmt::Display for FileVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "1:{}:{}:{}:{}:{}:{:016x}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns, self.hash
        )
    }
}

impl FromStr for FileVersion {
    type Err = VersionParseError;
    fn from_str(s: &str) -> Result<FileVersion, VersionParseError> {
        let bad = || VersionParseError(s.to_owned());
        let parts: Vec<&str> = s.split(':').collect();
        let [tag, dev, ino, size, mtime, ctime, hash] = parts.as_slice() else {
            return Err(bad());
        };
        if *tag != "1" {
            return Err(bad());
        }
        Ok(FileVersion {
            dev: dev.parse().map_err(|_| bad())?,
            ino: ino.parse().map_err(|_| bad())?,
            size: size.parse().map_err(|_| bad())?,
            mtime_ns: mtime.parse().map_err(|_| bad())?,
            ctime_ns: ctime.parse().map_err(|_| bad())?,
            hash: u64::from_str_radix(hash, 16).map_err(|_| bad())?,
        })
    }
}

impl Serialize for FileVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FileVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FileVersion, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn same_metadata_different_bytes_is_a_different_version() {
        // Timestamps can be too coarse to see a rewrite of the same size; the hash sees it.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "aaaa").unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_ne!(
            FileVersion::of(&meta, b"aaaa"),
            FileVersion::of(&meta, b"bbbb")
        );
        assert_eq!(
            FileVersion::of(&meta, b"aaaa"),
            FileVersion::of(&meta, b"aaaa")
        );
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in [
            "",
            "1:2:3",
            "2:0:0:0:0:0:0",
            "1:x:0:0:0:0:0",
            "1:0:0:0:0:0:zz",
        ] {
            assert!(bad.parse::<FileVersion>().is_err(), "{bad}");
        }
    }
}
