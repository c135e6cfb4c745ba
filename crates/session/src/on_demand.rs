//! Data an event keeps as its builder's own typed fields, written as text only when someone
//! needs it: a durable log's line (written once, as the event is appended), a reader of the
//! tree, an export; an in-memory log never writes it. For a caller's own event type on a hot path
//! (`dsh/step-timing`), as `tool/call` and `tool/result` keep theirs (see `deferred.rs`).
//!
//! Guarantees: the text goes through a [`DataWriter`], so it is in the canonical form the log
//! reader accepts (see `data_writer.rs`); it is written anew each time it is needed and not
//! kept, so it must be a pure function of fields that never change. A writer that misuses its
//! [`DataWriter`], or whose text is not as deep as it declared (a bug of the implementation,
//! not of input), gets `{}` as its data and an error in the log of the program: the event
//! keeps its seq and its place, its line always reads back, and the fault is reported.

use crate::data_writer::DataWriter;

/// An event's data kept as typed fields and written on demand ([`crate::Event::on_demand`]).
pub trait OnDemandData: Send + Sync + 'static {
    /// Writes the data: the same text every time it is called.
    fn write(&self) -> DataWriter<'static>;

    /// The nesting depth of the text [`OnDemandData::write`] gives (1: a flat object of strings
    /// and numbers), known from the fields' shape without writing them.
    fn depth(&self) -> usize;
}

impl<D: OnDemandData + ?Sized> OnDemandData for Box<D> {
    fn write(&self) -> DataWriter<'static> {
        (**self).write()
    }

    fn depth(&self) -> usize {
        (**self).depth()
    }
}

/// The text of `data` and its depth: `{}` (depth 1) when its writer was misused or its text is
/// not as deep as [`OnDemandData::depth`] declared (reported either way): the depth checked
/// when the event was appended must be that of what is written, or a line could be written
/// that the log reader refuses.
pub(crate) fn written(data: &dyn OnDemandData) -> (String, usize) {
    match data.write().finish() {
        Ok((text, depth, _)) if depth == data.depth() => (text.into_string(), depth),
        Ok((_, depth, _)) => {
            report(&format!(
                "its text is {depth} deep, not the {} it declared",
                data.depth()
            ));
            ("{}".to_owned(), 1)
        }
        Err(e) => {
            report(&e.to_string());
            ("{}".to_owned(), 1)
        }
    }
}

fn report(why: &str) {
    tracing::error!("an event's data written on demand was refused, written as {{}}: {why}");
}
