//! The in-memory event list: append in O(1) amortized, snapshot without copying events.
//!
//! Events live in fixed-size chunks behind `Arc`; a snapshot shares the chunks, and an append
//! after a snapshot copies at most one chunk (a bounded cost), never the whole list.

use std::sync::Arc;

use crate::event::Event;

/// Entries per chunk.
const CHUNK: usize = 1024;

/// One event with its seq.
pub type Entry = (u64, Arc<Event>);

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
        Events {
            chunks: Arc::from(self.chunks.as_slice()),
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
        self.iter().map(|(s, e)| (*s, &**e))
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
