//! Data an event keeps as its builder's own typed fields, written as text only when someone
//! needs it: a durable log's line (written on the log's writer thread, not on the appender's
//! path), a reader of the tree, an export. For a caller's own event type on a hot path
//! (`dsh/step-timing`), as `tool/call` and `tool/result` keep theirs (see `deferred.rs`).
//!
//! Guarantees: the text goes through a [`DataWriter`], so it is in the canonical form the log
//! reader accepts (see `data_writer.rs`); it is written anew each time it is needed and not
//! kept, so it must be a pure function of fields that never change. A writer that misuses its
//! [`DataWriter`] (a bug of the implementation, not of input) gets `{}` as its data and an
//! error in the log of the program: the event keeps its seq and its place, and the misuse is
//! reported, not silent.

use crate::data_writer::{DataError, DataWriter};

/// An event's data kept as typed fields and written on demand ([`crate::Event::on_demand`]).
pub trait OnDemandData: Send + Sync + 'static {
    /// Writes the data: the same text every time it is called.
    fn write(&self) -> DataWriter<'static>;

    /// The nesting depth of the text [`OnDemandData::write`] gives (1: a flat object of strings
    /// and numbers), known from the fields' shape without writing them.
    fn depth(&self) -> usize;
}

/// The text of `data`, `{}` when its writer was misused (reported).
pub(crate) fn written(data: &dyn OnDemandData) -> String {
    match data.write().finish() {
        Ok((text, depth, _)) => {
            debug_assert_eq!(depth, data.depth(), "declared depth of {text:.200}");
            text.into_string()
        }
        Err(e) => {
            report(&e);
            "{}".to_owned()
        }
    }
}

fn report(e: &DataError) {
    tracing::error!("an event's lazily written data was refused, written as {{}}: {e}");
}
