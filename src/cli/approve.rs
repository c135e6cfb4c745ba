//! Approval at the terminal: a question on stderr, one line from stdin per question (`y`/`yes`
//! allows once; anything else rejects; end of input means no channel: unavailable).

use std::io::{BufRead, Write};
use std::sync::Arc;

use async_trait::async_trait;
use dsh::guard::GuardError;
use dsh::guard::{AnswerNext, Answerer, ApprovalOutcome, ApprovalRequest};
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
        let question = question(req);
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

/// At most this many lines of a command, a written file or an edit are shown.
const SHOWN_LINES: usize = 12;

/// The question as the terminal asks it: [`description`], then the prompt.
pub fn question(req: &ApprovalRequest) -> String {
    let mut q = description(req);
    q.push_str("dsh: allow this call? [y/N] ");
    q
}

/// What a question shows, subject first: the tool and call, what it would do (the full command,
/// the path with the content's size and first lines, the edit's lines), then why it asks, the
/// model's own words marked as such. Everything from the model or the log is sanitized.
pub fn description(req: &ApprovalRequest) -> String {
    use super::render::sanitize;
    let mut q = format!(
        "dsh: {} wants approval (call {})\n",
        req.tool_name,
        sanitize(req.call_id.as_deref().unwrap_or("?"))
    );
    let args = req.arguments.as_ref().and_then(|a| a.json());
    let field = |k: &str| {
        args.as_ref()
            .and_then(|j| j.value().get(k))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let mut lines = |label: &str, text: &str, prefix: &str| {
        let all: Vec<&str> = text.lines().collect();
        for (i, l) in all.iter().take(SHOWN_LINES).enumerate() {
            let head = if i == 0 { label } else { "" };
            q.push_str(&format!("  {head:<11}{prefix}{}\n", sanitize(l)));
        }
        if all.len() > SHOWN_LINES {
            q.push_str(&format!(
                "  {:<11}… {} more lines\n",
                "",
                all.len() - SHOWN_LINES
            ));
        }
    };
    match &*req.tool_name {
        "read" | "glob" | "grep" => {
            if let Some(p) = field("file_path").or_else(|| field("path")) {
                lines("path:", &p, "");
            }
            if let Some(p) = field("pattern") {
                lines("pattern:", &p, "");
            }
        }
        "bash" => {
            if let Some(c) = field("command") {
                lines("command:", &c, "");
            }
        }
        "write" => {
            if let Some(p) = field("file_path") {
                lines("file:", &p, "");
            }
            if let Some(c) = field("content") {
                let size = format!("{} bytes, {} lines", c.len(), c.lines().count());
                lines("content:", &size, "");
                lines("", &c, "+ ");
            }
        }
        "edit" => {
            if let Some(p) = field("file_path") {
                lines("file:", &p, "");
            }
            if let Some(o) = field("old_string") {
                lines("replace:", &o, "- ");
            }
            if let Some(n) = field("new_string") {
                lines("with:", &n, "+ ");
            }
        }
        _ => {
            if let Some(a) = &args {
                let text = serde_json::to_string(a.value()).unwrap_or_default();
                let cut: String = text.chars().take(300).collect();
                lines("arguments:", &cut, "");
            }
        }
    }
    if let Some(r) = req.reason.as_deref() {
        match r.strip_prefix("escalate sandbox to ") {
            Some(rest) => {
                let (mode, why) = rest.split_once(": ").unwrap_or((rest, ""));
                q.push_str(&format!(
                    "  {:<11}run it outside the sandbox, in {}\n",
                    "asks to:",
                    sanitize(mode)
                ));
                if !why.is_empty() {
                    q.push_str(&format!(
                        "  {:<11}the model says: \"{}\"\n",
                        "because:",
                        sanitize(why)
                    ));
                }
            }
            None => q.push_str(&format!("  {:<11}{}\n", "why:", sanitize(r))),
        }
    }
    q
}
