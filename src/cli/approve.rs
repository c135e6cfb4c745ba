//! Approval at the terminal: a question on stderr, one line from stdin per question (`y`/`yes`
//! allows once; `s` allows it and every call the rule shown covers for the rest of the
//! session; `a` does so always in this workspace, written to the person's grants file; `n`
//! rejects, and words after it (`n: use the test database`) go to the model with the refusal;
//! anything else rejects; end of input means no channel: unavailable). A question cancelled
//! while its line is being read (Ctrl-C during the question) leaves that read to whoever reads
//! the terminal next ([`take_unclaimed`]): the chat's prompt, or the next question, gets the
//! line the person types next, which a read left behind would otherwise swallow.

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use dsh::Grants;
use dsh::guard::GuardError;
use dsh::guard::{AnswerNext, Answerer, ApprovalOutcome, ApprovalRequest};
use tokio::sync::Mutex;

/// A line read from stdin: bytes read (0 at the end of input) and the line.
pub type ReadLine = std::io::Result<(usize, String)>;

/// A read of stdin started for a question that was cancelled before the person answered.
static UNCLAIMED: parking_lot::Mutex<Option<tokio::sync::oneshot::Receiver<ReadLine>>> =
    parking_lot::Mutex::new(None);

/// The read of stdin a cancelled question left under way, if any: its line is the next one the
/// person types, and belongs to whoever reads the terminal next.
pub fn take_unclaimed() -> Option<tokio::sync::oneshot::Receiver<ReadLine>> {
    UNCLAIMED.lock().take()
}

/// A read of stdin a question is waiting on: dropped before its line came (the question was
/// cancelled, or the call dropped), it is left to the next reader ([`take_unclaimed`]).
struct Reading(Option<tokio::sync::oneshot::Receiver<ReadLine>>);

impl Reading {
    /// The line, once read (a read whose thread died reads as the end of input).
    async fn line(&mut self) -> ReadLine {
        let Some(rx) = self.0.as_mut() else {
            return Ok((0, String::new()));
        };
        let read = rx.await;
        self.0 = None;
        read.unwrap_or(Ok((0, String::new())))
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        if let Some(rx) = self.0.take() {
            *UNCLAIMED.lock() = Some(rx);
        }
    }
}

/// Reads the next line of stdin on a thread of its own (a read cannot be cancelled; see
/// [`take_unclaimed`]).
fn read_next_line() -> tokio::sync::oneshot::Receiver<ReadLine> {
    let (line, read) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let n = std::io::stdin().lock().read_line(&mut text);
        let _ = line.send(n.map(|n| (n, text)));
    });
    read
}

/// Asks the person at the terminal, one question at a time.
pub struct TerminalApprover {
    lock: Arc<Mutex<()>>,
    grants: Option<Arc<Grants>>,
}

impl TerminalApprover {
    /// Asks yes or no.
    #[cfg(feature = "mcp-serve")]
    pub fn new() -> TerminalApprover {
        TerminalApprover {
            lock: Arc::new(Mutex::new(())),
            grants: None,
        }
    }

    /// Also offers to allow, for the session or always, the rule that covers the call.
    pub fn with_grants(grants: Arc<Grants>) -> TerminalApprover {
        TerminalApprover {
            lock: Arc::new(Mutex::new(())),
            grants: Some(grants),
        }
    }
}

/// A person's answer.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Once,
    Session,
    Always,
    /// No, with what the person said after the `n`, if anything.
    No(Option<String>),
}

fn read_answer(line: &str, offers: bool, always: bool) -> Answer {
    let line = line.trim();
    match line.to_ascii_lowercase().as_str() {
        "y" | "yes" => return Answer::Once,
        "s" | "session" if offers => return Answer::Session,
        "a" | "always" if offers && always => return Answer::Always,
        _ => {}
    }
    // `n: why`, `n why`, `no, why`: the words after the refusal are for the model.
    let lower = line.to_ascii_lowercase();
    let rest = ["no", "n"]
        .iter()
        .find(|w| {
            lower.starts_with(*w)
                && line[w.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c == ':' || c == ',' || c.is_whitespace())
        })
        .map(|w| {
            line[w.len()..]
                .trim_start_matches([':', ','])
                .trim()
                .to_owned()
        })
        .filter(|r| !r.is_empty());
    Answer::No(rest)
}

#[async_trait]
impl Answerer for TerminalApprover {
    async fn answer(
        &self,
        req: &ApprovalRequest,
        _next: AnswerNext<'_>,
    ) -> Result<ApprovalOutcome, GuardError> {
        let _one_at_a_time = self.lock.lock().await;
        // A grant made while this question waited its turn may cover it now.
        if let Some(g) = &self.grants
            && g.covering(req).is_some()
        {
            return Ok(ApprovalOutcome::AllowedOnce);
        }
        let _paused = super::render::pause_live();
        let rules = match &self.grants {
            Some(_) => Grants::proposed(req),
            None => Vec::new(),
        };
        let file = self
            .grants
            .as_ref()
            .and_then(|g| g.file().map(Path::to_path_buf));
        let question = question(req, &rules, file.as_deref());
        let mut err = std::io::stderr();
        let _ = err.write_all(question.as_bytes());
        let _ = err.flush();
        // Cancelled (or dropped) before the line came, the read goes on: its line is the next
        // reader's, not this question's.
        let mut reading = Reading(Some(take_unclaimed().unwrap_or_else(read_next_line)));
        tokio::select! {
            r = reading.line() => match r {
                Ok((0, _)) | Err(_) => Ok(ApprovalOutcome::Unavailable),
                Ok((_, line)) => {
                    let answer = read_answer(&line, !rules.is_empty(), file.is_some());
                    Ok(self.settle(req, answer, &rules).await)
                }
            },
            _ = req.signal.aborted() => Ok(ApprovalOutcome::Cancelled),
        }
    }
}

impl TerminalApprover {
    /// Stores the grant a person chose (saying so), then allows the call; a grant that could
    /// not be stored is said, and the call is still allowed once, as the person answered yes.
    async fn settle(
        &self,
        req: &ApprovalRequest,
        answer: Answer,
        rules: &[String],
    ) -> ApprovalOutcome {
        let call = req.call_id.as_deref();
        let shown = rules.join(", ");
        let said = match (answer, &self.grants) {
            (Answer::No(words), _) => {
                if let Some(words) = words {
                    req.feedback.give(&words);
                }
                return ApprovalOutcome::Rejected;
            }
            (Answer::Once, _) | (_, None) => return ApprovalOutcome::AllowedOnce,
            (Answer::Session, Some(grants)) => grants
                .grant_session(rules, call)
                .await
                .map(|()| format!("dsh: allowed for the rest of this session: {shown}")),
            (Answer::Always, Some(grants)) => grants.grant_always(rules, call).await.map(|file| {
                format!(
                    "dsh: allowed always in this workspace: {shown} (written to {})",
                    file.display()
                )
            }),
        };
        let line = match said {
            Ok(line) => line,
            Err(e) => format!("dsh: allowed once; {e}"),
        };
        err_line!("{}", super::render::sanitize(&line));
        ApprovalOutcome::AllowedOnce
    }
}

/// At most this many lines of a command, a written file or an edit are shown.
const SHOWN_LINES: usize = 12;

/// The question as the terminal asks it: [`description`], then the answers: yes or no, and
/// when `rules` are offered, yes for them for the session and, with a grants `file`, always.
fn question(req: &ApprovalRequest, rules: &[String], file: Option<&Path>) -> String {
    use super::render::sanitize;
    let mut q = description(req);
    if rules.is_empty() {
        q.push_str(&format!(
            "  {:<11}y  yes · n  no (n: WHY tells the model why)\n",
            "answer:"
        ));
        q.push_str("dsh: allow this call? [y/N] ");
        return q;
    }
    let shown = sanitize(&rules.join(", "));
    q.push_str(&format!("  {:<11}y  yes, this call\n", "answer:"));
    q.push_str(&format!(
        "  {:<11}s  yes, and for the rest of this session: {shown}\n",
        ""
    ));
    if let Some(file) = file {
        q.push_str(&format!(
            "  {:<11}a  yes, and always in this workspace: {shown} (kept in {})\n",
            "",
            sanitize(&file.display().to_string())
        ));
    }
    q.push_str(&format!("  {:<11}n  no (n: WHY tells the model why)\n", ""));
    q.push_str(if file.is_some() {
        "dsh: allow this call? [y/s/a/N] "
    } else {
        "dsh: allow this call? [y/s/N] "
    });
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
        match r.strip_prefix(dsh::grants::ESCALATION_PREFIX) {
            Some(rest) => {
                let (mode, why) = rest.split_once(": ").unwrap_or((rest, ""));
                let what = match &*req.tool_name {
                    "read" | "write" | "edit" => "reach a file outside the workspace, in",
                    _ => "run it outside the sandbox, in",
                };
                q.push_str(&format!("  {:<11}{what} {}\n", "asks to:", sanitize(mode)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_the_words_after_it_and_nothing_else_grants() {
        assert_eq!(read_answer(" Y \n", false, false), Answer::Once);
        assert_eq!(read_answer("s", true, false), Answer::Session);
        // Offered nothing to grant, `s` and `a` are no.
        assert_eq!(read_answer("s", false, false), Answer::No(None));
        assert_eq!(read_answer("a", true, false), Answer::No(None));
        assert_eq!(read_answer("a", true, true), Answer::Always);
        assert_eq!(
            read_answer("n: use the test database", true, true),
            Answer::No(Some("use the test database".into()))
        );
        assert_eq!(
            read_answer("No, run it in /tmp", true, true),
            Answer::No(Some("run it in /tmp".into()))
        );
        assert_eq!(read_answer("n", true, true), Answer::No(None));
        assert_eq!(read_answer("nope", true, true), Answer::No(None));
        assert_eq!(read_answer("yes please", true, true), Answer::No(None));
    }
}
