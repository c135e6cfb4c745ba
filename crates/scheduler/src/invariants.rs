//! The tool-pipeline invariant checker (conformance LOG-18..20): the stages of one execution
//! happen in order. `tools/pre-execute` runs at most once; `tools/execute` only after it;
//! `tools/post-execute` only after one of them; `tools/result` once, for an execution with a
//! non-empty name and call id. (Freezing, which the reference also checks, holds by construction
//! here: every stage sees `&ToolExecution` and `&ToolResult`.)
//!
//! The runtime keeps a [`StageLog`] on every call and, in debug builds, fails loudly if its own
//! stages ever break these rules; hosts that instrument a pipeline themselves can feed a
//! [`PipelineChecker`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use dsh_core::{ExecutionToken, ToolExecution};
use parking_lot::Mutex;

/// A stage of the pipeline, as the invariant checker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The `tools/pre-execute` waterfall.
    PreExecute,
    /// The `tools/execute` around-chain.
    Execute,
    /// The `tools/post-execute` waterfall.
    PostExecute,
    /// The `tools/result` notice.
    Result,
}

impl Stage {
    fn bit(self) -> u8 {
        match self {
            Stage::PreExecute => 1,
            Stage::Execute => 2,
            Stage::PostExecute => 4,
            Stage::Result => 8,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Stage::PreExecute => "tools/pre-execute",
            Stage::Execute => "tools/execute",
            Stage::PostExecute => "tools/post-execute",
            Stage::Result => "tools/result",
        }
    }
}

/// A broken pipeline invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvariantViolation(pub String);

impl fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvariantViolation {}

/// The stages one execution has entered.
#[derive(Debug, Default)]
pub struct StageLog(AtomicU8);

impl StageLog {
    /// Records that `exec` enters `stage`, or says which rule that would break.
    pub fn enter(&self, stage: Stage, exec: &ToolExecution) -> Result<(), InvariantViolation> {
        check(self.0.load(Ordering::Acquire), stage, exec)?;
        self.0.fetch_or(stage.bit(), Ordering::AcqRel);
        Ok(())
    }

    /// [`StageLog::enter`] for a log only one task enters at a time (the runtime's own calls:
    /// each call's stages run one after the other in its own future): a read and a write
    /// instead of an atomic read-modify-write, four of them a call.
    #[inline]
    pub(crate) fn enter_in_turn(
        &self,
        stage: Stage,
        exec: &ToolExecution,
    ) -> Result<(), InvariantViolation> {
        let seen = self.0.load(Ordering::Acquire);
        check(seen, stage, exec)?;
        self.0.store(seen | stage.bit(), Ordering::Release);
        Ok(())
    }
}

/// Whether `exec`, having entered the stages `seen`, may enter `stage` (a few bit tests; the
/// message is written only for a violation).
#[inline]
fn check(seen: u8, stage: Stage, exec: &ToolExecution) -> Result<(), InvariantViolation> {
    let pre = Stage::PreExecute.bit();
    let execute = Stage::Execute.bit();
    let allowed = seen & stage.bit() == 0
        && match stage {
            Stage::PreExecute => true,
            Stage::Execute => seen & pre != 0,
            Stage::PostExecute => seen & (pre | execute) != 0,
            Stage::Result => !exec.name().is_empty() && !exec.call_id().is_empty(),
        };
    if allowed {
        Ok(())
    } else {
        Err(violation(seen, stage, exec))
    }
}

/// The rule entering `stage` after `seen` breaks.
#[cold]
fn violation(seen: u8, stage: Stage, exec: &ToolExecution) -> InvariantViolation {
    let what = if seen & stage.bit() != 0 {
        format!("{} repeated for one execution", stage.name())
    } else {
        match stage {
            Stage::Execute => "tools/execute must follow tools/pre-execute".to_owned(),
            Stage::PostExecute => {
                "tools/post-execute must follow tools/pre-execute or tools/execute".to_owned()
            }
            _ => "tools/result needs an execution with a non-empty name and callId".to_owned(),
        }
    };
    InvariantViolation(format!("{what} (call \"{}\")", exec.call_id()))
}

/// Checks stage notices for many executions, keyed by their tokens; an execution is forgotten
/// once its `tools/result` is seen.
#[derive(Default)]
pub struct PipelineChecker {
    calls: Mutex<HashMap<ExecutionToken, Arc<StageLog>>>,
}

impl PipelineChecker {
    /// A checker with no executions in flight.
    pub fn new() -> PipelineChecker {
        PipelineChecker::default()
    }

    /// Checks and records one stage notice.
    pub fn observe(&self, stage: Stage, exec: &ToolExecution) -> Result<(), InvariantViolation> {
        let log = self.calls.lock().entry(exec.token()).or_default().clone();
        let outcome = log.enter(stage, exec);
        if stage == Stage::Result && outcome.is_ok() {
            self.calls.lock().remove(&exec.token());
        }
        outcome
    }

    /// A registry change between calls: never a violation (LOG-18).
    pub fn registry_changed(&self) {}

    /// Executions seen but not yet finished.
    pub fn in_flight(&self) -> usize {
        self.calls.lock().len()
    }
}

/// In debug builds, a broken invariant of the runtime's own stages is a bug: fail loudly.
pub(crate) fn expect_ordered(outcome: Result<(), InvariantViolation>) {
    if let Err(v) = outcome {
        tracing::error!("pipeline invariant broken: {v}");
        debug_assert!(false, "pipeline invariant broken: {v}");
    }
}
