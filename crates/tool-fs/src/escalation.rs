//! Reaching a file outside the workspace (FS-36..39): a `read`, `write` or `edit` call whose
//! file lies outside every root may ask, with `sandbox_permissions: "danger-full-access"` and a
//! `justification`, to reach it this once.
//!
//! Guarantees:
//! - Nothing outside the roots is touched without a fresh approval of that very call: the
//!   policy turns such a call into an `ask` whose reason is
//!   `escalate sandbox to danger-full-access: <justification>`, so no grant and no earlier
//!   answer covers it; rejected, cancelled or with no way to ask (no approval service, no
//!   agent to route it through), the call fails and nothing is read or written.
//! - The policy never overrides the listeners after it: a `deny` stays a `deny`, and their
//!   `ask` is joined with its own. A file inside the roots needs no escalation and the
//!   argument changes nothing.
//! - An approved call reaches exactly its own file: the body works in a workspace rooted at
//!   the file's directory, with the same atomic writes, the same read-before-write policy and
//!   the same `fs/observed` records as inside the roots.
//! - Without [`crate::FsTools::with_escalation`] the tools neither offer the arguments nor
//!   honour them: a path outside the roots is refused as always.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use dsh_core::{
    ExecutionToken, Failure, PreExecuteHook, PreNext, PreToolDecision, ToolExecution, ToolResult,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::error::FsError;
use crate::seam::Workspace;
use crate::session::FsSessions;

/// The only mode a file call may escalate to.
pub const ESCALATED_MODE: &str = "danger-full-access";

/// The tools that may escalate.
const ESCALATING: [&str; 3] = ["read", "write", "edit"];

/// The calls approved to reach a file outside the roots, by execution; shared by the policy
/// that records them and the tools that honour them.
#[derive(Clone, Default)]
pub(crate) struct Escalations {
    approved: Arc<Mutex<HashSet<ExecutionToken>>>,
}

impl Escalations {
    pub(crate) fn is_escalated(&self, token: ExecutionToken) -> bool {
        self.approved.lock().contains(&token)
    }
}

/// The two arguments the tools take when escalation is on, for their parameter schemas.
pub(crate) fn parameters(schema: &mut Value) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "sandbox_permissions".to_owned(),
            json!({
                "type": "string",
                "enum": [ESCALATED_MODE],
                "description": "Only for a file outside the workspace: \"danger-full-access\" asks the user to let this one call reach it."
            }),
        );
        props.insert(
            "justification".to_owned(),
            json!({
                "type": "string",
                "description": "Why this call must reach a file outside the workspace; shown to the user who decides."
            }),
        );
    }
}

/// A workspace for one approved call: rooted at the directory of its file (which must exist),
/// and the file's path inside it.
pub(crate) fn outside_place(cwd: &Path, raw: &str) -> Result<(Workspace, PathBuf), Failure> {
    let joined = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        cwd.join(raw)
    };
    let (Some(dir), Some(name)) = (joined.parent(), joined.file_name()) else {
        return Err(Failure::new(format!("{raw} names no file")));
    };
    let workspace = Workspace::new([dir]).map_err(|e| e.to_failure())?;
    let dir = workspace
        .roots()
        .first()
        .cloned()
        .unwrap_or_else(|| dir.to_path_buf());
    let path = workspace
        .resolve_blocking(&dir, Path::new(name))
        .map_err(|e| e.to_failure())?;
    Ok((workspace, path))
}

/// The `tools/pre-execute` listener that turns a request to reach a file outside the roots
/// into a fresh approval question, and forgets each decision once the call's result is final.
#[derive(Clone)]
pub struct EscalationPolicy {
    escalations: Escalations,
    workspace: Workspace,
    sessions: FsSessions,
}

impl EscalationPolicy {
    pub(crate) fn new(
        escalations: Escalations,
        workspace: Workspace,
        sessions: FsSessions,
    ) -> EscalationPolicy {
        EscalationPolicy {
            escalations,
            workspace,
            sessions,
        }
    }

    /// Why `exec` asks to escalate, or `Ok(None)` when it does not need to; `Err` when the
    /// request itself is malformed.
    fn request(&self, exec: &ToolExecution) -> Result<Option<String>, String> {
        if !ESCALATING.contains(&exec.name()) {
            return Ok(None);
        }
        let Some(args) = exec.arguments().json() else {
            return Ok(None);
        };
        let args = args.value();
        match args.get("sandbox_permissions") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(m)) if m == ESCALATED_MODE => {}
            Some(other) => {
                return Err(format!(
                    "sandbox_permissions must be \"{ESCALATED_MODE}\" (to reach a file outside \
                     the workspace), not {other}"
                ));
            }
        }
        let Some(raw) = args.get("file_path").and_then(Value::as_str) else {
            return Ok(None);
        };
        let cwd = self.sessions.context_for(exec.agent()).cwd;
        if self
            .workspace
            .resolve_blocking(&cwd, Path::new(raw))
            .is_ok()
        {
            // Inside the roots: nothing to escalate.
            return Ok(None);
        }
        let justification = args
            .get("justification")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|j| !j.is_empty());
        Ok(Some(match justification {
            Some(j) => format!("escalate sandbox to {ESCALATED_MODE}: {j}"),
            None => format!("escalate sandbox to {ESCALATED_MODE}"),
        }))
    }
}

#[async_trait]
impl PreExecuteHook for EscalationPolicy {
    async fn pre_execute(
        &self,
        exec: &ToolExecution,
        next: PreNext<'_>,
    ) -> Result<PreToolDecision, Failure> {
        let ask = match self.request(exec) {
            Ok(None) => return next.run(exec).await,
            Ok(Some(ask)) => ask,
            Err(why) => return Ok(PreToolDecision::deny(why)),
        };
        let decision = match next.run(exec).await? {
            d @ PreToolDecision::Deny { .. } => return Ok(d),
            PreToolDecision::Ask {
                reason: Some(theirs),
            } => PreToolDecision::ask(format!("{ask}; {theirs}")),
            PreToolDecision::Ask { reason: None } | PreToolDecision::Allow => {
                PreToolDecision::ask(ask)
            }
        };
        // The body runs only once the question is answered `allowed-once`.
        self.escalations.approved.lock().insert(exec.token());
        Ok(decision)
    }
}

impl dsh_core::ResultObserver for EscalationPolicy {
    fn on_result(&self, exec: &ToolExecution, _result: &ToolResult) {
        self.escalations.approved.lock().remove(&exec.token());
    }
}

/// The failure for a path outside the roots when the call could ask to reach it.
pub(crate) fn outside_hint(e: &FsError) -> Failure {
    if !e.is_outside() {
        return e.to_failure();
    }
    crate::remedy::apply_remedy(&Failure::fs(
        e.code(),
        format!(
            "{e}; to reach a file outside the workspace, call again with sandbox_permissions: \
             \"{ESCALATED_MODE}\" and a justification, and the user is asked"
        ),
    ))
}
