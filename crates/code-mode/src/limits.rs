//! Resource limits of one run, with safe defaults (spec CM6). Every limit has a name that the
//! failure message quotes, so the model learns which bound it hit.

use std::time::Duration;

use crate::error::CodeModeError;

/// The bounds one program runs under. Exceeding any of them fails the run with a message that
/// names the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Heap the interpreter may allocate (`memoryBytes`, default 64 MiB).
    pub memory_bytes: usize,
    /// Interpreter stack (`stackBytes`, default 8 MiB); deep recursion fails with a
    /// `RangeError` naming it. The run's thread gets this much plus a fixed margin.
    pub stack_bytes: usize,
    /// Wall-clock budget of the whole run, time spent waiting on tools included (`wallTime`,
    /// default 120 s).
    pub wall_time: Duration,
    /// Tool calls one run may make (`maxSubCalls`, default 1000).
    pub max_sub_calls: usize,
    /// Bytes of console output plus the JSON of the returned value (`maxOutputBytes`, default
    /// 1 MiB).
    pub max_output_bytes: usize,
    /// Bytes of program source (`maxProgramBytes`, default 256 KiB).
    pub max_program_bytes: usize,
}

/// Stack the run's thread gets beyond [`Limits::stack_bytes`], for the host code around the
/// interpreter.
pub(crate) const THREAD_STACK_MARGIN: usize = 8 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            stack_bytes: 8 << 20,
            wall_time: Duration::from_secs(120),
            max_sub_calls: 1000,
            max_output_bytes: 1 << 20,
            max_program_bytes: 256 << 10,
        }
    }
}

impl Limits {
    /// Checks that every limit is usable (positive; memory at least 1 MiB, stack at least
    /// 256 KiB, so the interpreter can start at all).
    pub fn validate(&self) -> Result<(), CodeModeError> {
        let bad = |setting, requirement| {
            Err(CodeModeError::InvalidSetting {
                setting,
                requirement,
            })
        };
        if self.memory_bytes < (1 << 20) {
            return bad("memoryBytes", "at least 1 MiB");
        }
        if self.stack_bytes < (256 << 10) {
            return bad("stackBytes", "at least 256 KiB");
        }
        if self.wall_time.is_zero() {
            return bad("wallTime", "positive");
        }
        if self.max_sub_calls == 0 {
            return bad("maxSubCalls", "a positive integer");
        }
        if self.max_output_bytes == 0 {
            return bad("maxOutputBytes", "a positive integer");
        }
        if self.max_program_bytes == 0 {
            return bad("maxProgramBytes", "a positive integer");
        }
        Ok(())
    }

    /// `<n> bytes` in the largest whole unit, for messages.
    pub(crate) fn bytes(n: usize) -> String {
        if n >= (1 << 20) && n.is_multiple_of(1 << 20) {
            format!("{} MiB", n >> 20)
        } else if n >= (1 << 10) && n.is_multiple_of(1 << 10) {
            format!("{} KiB", n >> 10)
        } else {
            format!("{n} bytes")
        }
    }
}
