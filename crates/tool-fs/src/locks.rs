//! Per-path async mutexes: every compare-and-set on one resolved path runs alone, so two guarded
//! writes with the same basis can never both apply (conformance FS-70). Entries are weak and the
//! table is swept when it doubles, so it holds only paths with a writer in flight (amortized O(1)).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

#[derive(Default)]
struct Table {
    map: HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>,
    sweep_at: usize,
}

/// The lock table of one workspace.
#[derive(Default)]
pub(crate) struct PathLocks {
    table: Mutex<Table>,
}

impl PathLocks {
    /// The mutex for `path`, shared by every caller holding it at the same time.
    pub(crate) fn for_path(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut t = self.table.lock();
        if let Some(live) = t.map.get(path).and_then(Weak::upgrade) {
            return live;
        }
        let fresh = Arc::new(tokio::sync::Mutex::new(()));
        t.map.insert(path.to_path_buf(), Arc::downgrade(&fresh));
        if t.map.len() > t.sweep_at {
            t.map.retain(|_, w| w.strong_count() > 0);
            t.sweep_at = (t.map.len() * 2).max(64);
        }
        fresh
    }

    /// How many paths the table holds (live or not yet swept).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.lock().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mutex_per_live_path_and_dead_entries_are_swept() {
        let locks = PathLocks::default();
        let a1 = locks.for_path(Path::new("/w/a"));
        let a2 = locks.for_path(Path::new("/w/a"));
        assert!(Arc::ptr_eq(&a1, &a2));
        drop((a1, a2));
        for i in 0..1000 {
            let _ = locks.for_path(&PathBuf::from(format!("/w/{i}")));
        }
        assert!(
            locks.len() <= 130,
            "table kept {} dead entries",
            locks.len()
        );
    }
}
