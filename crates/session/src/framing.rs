//! Which turn and step are open, folded from `turn/*` and `step/*` events in O(1) per event.

use crate::event::{Event, types};

/// The open turn and step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Framing {
    /// The open turn's number.
    pub turn: Option<u64>,
    /// The open step's `(turn, step)`.
    pub step: Option<(u64, u64)>,
}

impl Framing {
    /// Folds one event.
    pub fn apply(&mut self, event: &Event) {
        match event.event_type() {
            types::TURN_START => {
                self.turn = Some(event.data_u64("turn").unwrap_or(0));
                self.step = None;
            }
            types::TURN_END => {
                self.turn = None;
                self.step = None;
            }
            types::STEP_START => {
                let turn = event.data_u64("turn").or(self.turn).unwrap_or_default();
                self.step = Some((turn, event.data_u64("step").unwrap_or(0)));
            }
            types::STEP_END => self.step = None,
            _ => {}
        }
    }
}
