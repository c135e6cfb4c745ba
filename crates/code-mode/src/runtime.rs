//! The code runtime seam: what `run_code` needs from an interpreter. [`crate::QuickJs`] is the
//! embedded implementation; tests and hosts may mount others (a fake that scripts binding
//! calls, a remote sandbox).

use async_trait::async_trait;

use crate::outcome::{CodeOutcome, CodeRun};

/// Runs programs. One call of [`CodeRuntime::run`] is one isolated run: nothing survives
/// between runs.
#[async_trait]
pub trait CodeRuntime: Send + Sync + 'static {
    /// The program language (`javascript`, `typescript`, `python`): it picks the `run_code`
    /// description flavor and the SDK renderer.
    fn language(&self) -> &str;

    /// Runs one program to completion. A failure is a field of the outcome, never a panic.
    async fn run(&self, run: CodeRun) -> CodeOutcome;
}
