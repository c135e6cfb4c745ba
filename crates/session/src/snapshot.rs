//! The in-memory event list: append in O(1) amortized, snapshot without copying events.
//!
//! Events live in fixed-size chunks behind `Arc`, each event held by value (an [`Event`] is a
//! few shared handles: no allocation of its own). A snapshot shares the full chunks and clones
//! the events of the partial last one (at most `CHUNK - 1`, a bounded cost), so the list's own
//! last chunk is never shared and an append never copies anything.

use std::sync::Arc;

use crate::event::Event;

/// Entries per chunk.
const CHUNK: usize = 1024;

/// One event with its seq.
pub type Entry = (u64, Event);

/// The growing list a session appends to.
#[derive(Default)]
pub(crate) struct EventList {
    chunks: Vec<Arc<Vec<Entry>>>,
    len: usize,
}

impl EventList {
    /// Appends one entry.
    pub fn push(&mut self, entry: Entry) {
        let needs_chunk = self.chunks.last().is_none_or(|c| c.len() >= CHUNK);
        if needs_chunk {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        if let Some(last) = self.chunks.last_mut() {
            Arc::make_mut(last).push(entry);
            self.len += 1;
        }
    }

    /// A frozen view of the list as it is now.
    pub fn snapshot(&self) -> Events {
        let chunks: Vec<Arc<Vec<Entry>>> = self
            .chunks
            .iter()
            .map(|c| {
                if c.len() >= CHUNK {
                    c.clone()
                } else {
                    Arc::new(c.as_ref().clone())
                }
            })
            .collect();
        Events {
            chunks: Arc::from(chunks),
            len: self.len,
        }
    }
}

/// A frozen, cheaply cloned view of a session's events in seq order.
#[derive(Clone)]
pub struct Events {
    chunks: Arc<[Arc<Vec<Entry>>]>,
    len: usize,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Events {
    /// Number of events (a chunk run counts once).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry at `index` (0-based position, not seq).
    pub fn get(&self, index: usize) -> Option<&Entry> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// The last entry.
    pub fn last(&self) -> Option<&Entry> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The event occupying `seq` (a chunk run occupies several seqs), found in O(log n).
    pub fn find_seq(&self, seq: u64) -> Option<&Entry> {
        let (mut lo, mut hi) = (0usize, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (s, e) = self.get(mid)?;
            if seq < *s {
                hi = mid;
            } else if seq >= s + e.seq_span().max(1) {
                lo = mid + 1;
            } else {
                return self.get(mid);
            }
        }
        None
    }

    /// Iterates over the entries in seq order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Entry> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The events with their seqs, as `(seq, &Event)` pairs.
    pub fn pairs(&self) -> impl Iterator<Item = (u64, &Event)> + '_ {
        self.iter().map(|(s, e)| (*s, e))
    }

    /// Copies the entries into a vector (the events themselves are shared, not copied).
    pub fn to_vec(&self) -> Vec<Entry> {
        self.iter().cloned().collect()
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Entry;
    type IntoIter = Box<dyn Iterator<Item = &'a Entry> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use dsh_core::Json;

    fn entry(seq: u64) -> Entry {
        (seq, Event::other("t/x", Json::from(seq)))
    }

    #[test]
    fn snapshots_stay_frozen_share_full_chunks_and_never_make_appends_copy() {
        let mut list = EventList::default();
        let mut snapshots = Vec::new();
        for seq in 0..2500u64 {
            list.push(entry(seq));
            if seq % 300 == 0 {
                snapshots.push((seq + 1, list.snapshot()));
            }
            // The list's last chunk is never shared, so pushing never clones it.
            assert!(
                list.chunks
                    .last()
                    .is_some_and(|c| Arc::strong_count(c) == 1)
            );
        }
        for (len, snap) in &snapshots {
            assert_eq!(snap.len() as u64, *len);
            assert_eq!(
                snap.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                (0..*len).collect::<Vec<_>>()
            );
        }
        let last = list.snapshot();
        let (_, late) = snapshots.last().expect("taken");
        assert!(
            Arc::ptr_eq(&last.chunks[0], &late.chunks[0]),
            "full chunks are shared"
        );
        assert_eq!(last.find_seq(2499).map(|(s, _)| *s), Some(2499));
        assert_eq!(last.find_seq(2500), None);
        assert_eq!(last.get(1024).map(|(s, _)| *s), Some(1024));
    }
}
