//! Approval at the terminal: a question on stderr, one line from stdin per question (`y`/`yes`
//! allows once; anything else rejects; end of input means no channel: unavailable).

use std::io::{BufRead, Write};
use std::sync::Arc;

use async_trait::async_trait;
use dsh::guard::GuardError;
use dsh::guard::approval::{AnswerNext, Answerer, ApprovalOutcome, ApprovalRequest};
use tokio::sync::Mutex;

/// Asks the person at the terminal, one question at a time.
pub struct TerminalApprover {
    lock: Arc<Mutex<()>>,
}

impl TerminalApprover {
    pub fn new() -> TerminalApprover {
        TerminalApprover {
            lock: Arc::new(Mutex::new(())),
        }
    }
}

#[async_trait]
impl Answerer for TerminalApprover {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        _next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        let _one_at_a_time = self.lock.lock().await;
        let _paused = super::render::pause_live();
        let question = format!(
            "dsh: allow {} call {}{}? [y/N] ",
            req.tool_name,
            req.call_id.as_deref().unwrap_or("?"),
            req.reason
                .as_deref()
                .map(|r| format!(" ({})", super::render::sanitize(r)))
                .unwrap_or_default()
        );
        let read = tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr();
            let _ = err.write_all(question.as_bytes());
            let _ = err.flush();
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map(|n| (n, line))
        });
        tokio::select! {
            r = read => match r {
                Ok(Ok((0, _))) => Ok(ApprovalOutcome::Unavailable),
                Ok(Ok((_, line))) => {
                    let a = line.trim().to_ascii_lowercase();
                    Ok(if a == "y" || a == "yes" { ApprovalOutcome::AllowedOnce } else { ApprovalOutcome::Rejected })
                }
                _ => Ok(ApprovalOutcome::Unavailable),
            },
            _ = req.signal.aborted() => Ok(ApprovalOutcome::Cancelled),
        }
    }
}
