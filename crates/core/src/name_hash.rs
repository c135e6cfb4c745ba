//! A fast, unkeyed hasher for tables keyed by tool and agent names.
//!
//! Guarantees: deterministic within a process; not resistant to chosen collisions, which is
//! acceptable only for tables whose keys the host inserts (names arrive from the model only as
//! lookups, and a lookup cannot make a table degrade). Never use it for a table filled from
//! model or network input.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of the Fx hash (the golden ratio in 64 bits, rotated).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// A word-at-a-time multiplicative hasher (the Fx hash of rustc).
#[derive(Default, Clone, Copy)]
pub(crate) struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Builds [`NameHasher`]s.
pub(crate) type BuildNameHasher = BuildHasherDefault<NameHasher>;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    use super::BuildNameHasher;

    #[test]
    fn equal_names_hash_equal_and_a_table_finds_every_key() {
        let b = BuildNameHasher::default();
        assert_eq!(
            b.hash_one("read_file"),
            b.hash_one(String::from("read_file"))
        );
        assert_ne!(b.hash_one("a"), b.hash_one("b"));
        // Prefixes and lengths around the word size stay apart.
        assert_ne!(b.hash_one("abcdefgh"), b.hash_one("abcdefgh\0"));
        let mut m: HashMap<String, usize, BuildNameHasher> = HashMap::default();
        for i in 0..2000 {
            m.insert(format!("tool_{i}"), i);
        }
        assert!((0..2000).all(|i| m.get(&format!("tool_{i}")) == Some(&i)));
        assert_eq!(m.get("tool_2000"), None);
    }
}
