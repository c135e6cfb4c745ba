//! The approval seam as the runtime sees it (spec P2): `ask` goes to an [`Approver`]; only an
//! explicit grant continues; no approver, or any non-grant, denies with its own message.

use async_trait::async_trait;
use dsh_core::codes::messages;
use dsh_core::{Failure, ToolExecution};

/// Resolves an `ask` for one call: `Ok(())` only when a human allowed it once.
///
/// This is the runtime's seam, implemented by `dsh_guard::ApprovalService` (what the `dsh`
/// facade wires). To answer questions, implement `dsh_guard::Answerer` instead (or
/// use `answer_fn`) and add it to the service: implement this only to replace the service
/// altogether.
#[async_trait]
pub trait Approver: Send + Sync + 'static {
    /// Asks; every outcome but a grant is a failure carrying the reference's message.
    async fn approve(&self, exec: &ToolExecution, reason: Option<&str>) -> Result<(), Failure>;
}

/// The decision when no approver is mounted (APR-01, APR-02): the ask degrades to a denial.
pub(crate) fn no_approver(exec: &ToolExecution, reason: Option<&str>) -> Failure {
    match reason {
        Some(r) => Failure::new(r),
        None => Failure::new(messages::approval_not_supported(exec.name())),
    }
}

#[async_trait]
impl Approver for dsh_guard::ApprovalService {
    async fn approve(&self, exec: &ToolExecution, reason: Option<&str>) -> Result<(), Failure> {
        dsh_guard::resolve_ask(Some(self), exec, reason).await
    }
}
