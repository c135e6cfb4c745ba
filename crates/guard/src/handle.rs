//! A registration handle that removes exactly its listener when disposed or dropped; used by the
//! single-decision waterfalls and the approval answerer chain.

/// Removes its listener when disposed or dropped; `keep()` leaves it registered for good.
#[must_use = "dropping this handle removes the listener at once (`let _ =` drops it too): bind it to a named variable or call `.keep()`"]
pub struct ListenerHandle {
    remove: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl ListenerHandle {
    pub(crate) fn new(remove: impl FnOnce() + Send + Sync + 'static) -> ListenerHandle {
        ListenerHandle {
            remove: Some(Box::new(remove)),
        }
    }
    /// Removes the listener now.
    pub fn dispose(mut self) {
        if let Some(f) = self.remove.take() {
            f();
        }
    }
    /// Keeps the listener for the lifetime of what it was registered on.
    pub fn keep(mut self) {
        self.remove = None;
    }
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        if let Some(f) = self.remove.take() {
            f();
        }
    }
}

impl std::fmt::Debug for ListenerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerHandle")
            .field("armed", &self.remove.is_some())
            .finish()
    }
}
