//! `dsh check`, `dsh transcript` and `dsh repair`.

use std::path::{Path, PathBuf};

use super::{Exit, Format};

/// Checks each log; 0 when all are clean, 1 otherwise.
pub fn check(logs: &[PathBuf]) -> Result<i32, Exit> {
    let mut clean = true;
    for path in logs {
        let label = path.display().to_string();
        let status = dsh::session::check_file_status(path).map_err(|e| e.to_string());
        let repair = format!("dsh repair {label}");
        clean &= report_check(
            &label,
            status,
            &repair,
            "holds its lock",
            &LineNames::Numbers,
        );
    }
    Ok(if clean { 0 } else { 1 })
}

/// How messages name a log's lines: by number in a file, by seq in a stored session (whose
/// lines have no numbers a person could look up).
pub enum LineNames {
    /// `LOG:LINE: ...` and `line LINE`.
    Numbers,
    /// `ID, seq SEQ: ...` and `seq SEQ`: each line's seq, the header's `None`.
    Seqs(Vec<Option<u64>>),
}

impl LineNames {
    /// The names of a stored session's exported lines (numbers when they do not read).
    pub fn of_session(bytes: &[u8]) -> LineNames {
        match dsh::session::read_log(bytes) {
            Ok(log) => LineNames::Seqs(
                std::iter::once(None)
                    .chain(log.events.iter().map(|(seq, _)| Some(*seq)))
                    .collect(),
            ),
            Err(_) => LineNames::Numbers,
        }
    }

    /// Line `line` (1-based) as a message names it.
    fn name(&self, line: usize) -> String {
        match self {
            LineNames::Seqs(seqs) => match seqs.get(line.wrapping_sub(1)) {
                Some(Some(seq)) => format!("seq {seq}"),
                Some(None) => "the header".to_owned(),
                None => format!("line {line}"),
            },
            LineNames::Numbers => format!("line {line}"),
        }
    }

    /// What follows a log's label before a message about line `line`.
    pub fn after_label(&self, line: usize) -> String {
        match self {
            LineNames::Seqs(_) => format!(", {}", self.name(line)),
            LineNames::Numbers => format!(":{line}"),
        }
    }
}

/// Prints what checking one log found, `label` naming it (a file, or a stored session);
/// `repair` is the command that repairs it, `holding` says how a writer is known to be live
/// and `names` how its lines are named. Returns whether the log counts as clean.
pub fn report_check(
    label: &str,
    status: Result<dsh::session::FileCheck, String>,
    repair: &str,
    holding: &str,
    names: &LineNames,
) -> bool {
    match status {
        Ok(status) if status.problems.is_empty() => {
            super::out(&format!("{label}: ok"));
            true
        }
        Ok(status) => {
            let in_flight = status.problems.iter().filter(|p| p.in_flight).count();
            let settled = status.problems.len() - in_flight;
            for p in &status.problems {
                // Messages quote the log (call ids, types): never let it drive the terminal.
                let message = super::render::sanitize(&p.message);
                let note = if p.in_flight && status.live {
                    " (in flight: the session is still being written)"
                } else {
                    ""
                };
                super::out(&format!(
                    "{label}{}: {message}{note}",
                    names.after_label(p.line)
                ));
            }
            if in_flight > 0 && status.live {
                super::out(&format!(
                    "{label}: still being written (a running dsh {holding}): {in_flight} call(s) not answered yet"
                ));
            } else if in_flight > 0 {
                super::out(&format!(
                    "{label}: not being written (no process {holding}): {in_flight} call(s) the model made will never be answered; `{repair}` answers them"
                ));
            }
            if settled > 0 || !status.live {
                false
            } else {
                super::out(&format!("{label}: ok so far"));
                true
            }
        }
        Err(message) => {
            let message = super::render::sanitize(&message);
            super::out(&format!("{label}: {message}"));
            false
        }
    }
}

/// How many bytes of `bytes` are whole lines (up to and with the last newline).
pub(crate) fn complete_lines(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// Prints the model-visible history.
pub fn transcript(log: &Path, format: Format) -> Result<i32, Exit> {
    let bytes = std::fs::read(log)
        .map_err(|e| Exit::internal(format!("cannot read {}: {e}", log.display())))?;
    let label = log.display().to_string();
    // A log some process holds is being written: its calls in flight are answered by it.
    let live = dsh::session::check_file_status(log).is_ok_and(|s| s.live);
    let writer = Writer {
        live: live.then_some("holds its lock"),
        repair: format!("dsh repair {label}"),
    };
    transcript_bytes(&label, &bytes, format, &LineNames::Numbers, &writer)
}

/// Who writes a log, as a transcript's warning says it.
pub struct Writer {
    /// How a running dsh is known to write it (`holds its lock`), when one does.
    pub live: Option<&'static str>,
    /// The command that answers calls left unanswered once nobody writes it.
    pub repair: String,
}

/// Prints the model-visible history of a log's bytes, `label` naming the log, `names` its
/// lines and `writer` who writes it.
pub fn transcript_bytes(
    label: &str,
    bytes: &[u8],
    format: Format,
    names: &LineNames,
    writer: &Writer,
) -> Result<i32, Exit> {
    // A last line without its newline was torn by a crash: it never reached a model, and repair
    // or a resume cuts it off, so the history is that of the complete lines (the warning below
    // names it, as `dsh check` does).
    let parsed = dsh::session::read_log(&bytes[..complete_lines(bytes)])
        .map_err(|e| Exit::internal(format!("{label}: {e}")))?;
    // A history with an unanswered call is refused by the providers: say so, never silently.
    let problems = dsh::session::check_bytes(bytes);
    let in_flight = problems.iter().filter(|p| p.in_flight).count();
    if let Some(holding) = writer.live
        && in_flight > 0
        && in_flight == problems.len()
    {
        // Calls a running writer has not answered yet: no repair is due (nor allowed).
        err_line!(
            "dsh: note: {label} is still being written (a running dsh {holding}): {in_flight} call(s) not answered yet, so the history stops before their results"
        );
    } else if let Some(first) = problems.first() {
        let hint = if in_flight > 0 && writer.live.is_none() {
            format!("; `{}` answers the calls left unanswered", writer.repair)
        } else {
            String::new()
        };
        err_line!(
            "dsh: warning: {label} has {} problem(s), so a provider may refuse this history (`dsh check` lists them{hint}); first: {}: {}",
            problems.len(),
            names.name(first.line),
            super::render::sanitize(&first.message)
        );
    }
    let messages = dsh::session::derive_messages_from(parsed.events.iter().map(|(s, e)| (*s, e)));
    // Arguments may nest thousands of levels: the history is copied and printed on a stack
    // grown for its depth, and dropped without recursion (a `Json` does both).
    let out = match format {
        Format::Dsh => dsh::core::Json::from_shallow(serde_json::Value::Array(
            messages.iter().map(|m| m.to_value()).collect(),
        )),
        Format::Openai => dsh::session::to_openai(&messages),
        Format::Anthropic => dsh::session::to_anthropic(&messages),
    };
    // Pretty output indents every level, so a deep history would print in quadratic size:
    // past a modest depth it is printed compact.
    let text = stacker::grow(out.depth().saturating_mul(2048) + (1 << 20), || {
        if out.depth() <= 64 {
            serde_json::to_string_pretty(out.value())
        } else {
            serde_json::to_string(out.value())
        }
    })
    .map_err(|e| Exit::internal(format!("cannot print the transcript: {e}")))?;
    super::out(&super::render::json_for_terminal(text));
    Ok(0)
}

/// Applies crash repair and reports what it closed; 1 when the log still has problems repair
/// cannot fix (listed, with why and what to do), else 0.
pub fn repair(log: &Path) -> Result<i32, Exit> {
    let label = log.display().to_string();
    let report = dsh::session::repair(log).map_err(|e| Exit::internal(format!("{label}: {e}")))?;
    let left =
        dsh::session::check_file(log).map_err(|e| Exit::internal(format!("{label}: {e}")))?;
    if !report.is_clean() {
        print_repair(&label, &report);
    } else if left.is_empty() {
        super::out(&format!("{label}: nothing to repair"));
    }
    if left.is_empty() {
        return Ok(0);
    }
    super::out(&super::render::sanitize(&format!(
        "{label}: repair cannot fix {} problem(s): {CANNOT_FIX}; change the lines named, or start a new session",
        left.len()
    )));
    for p in &left {
        super::out(&super::render::sanitize(&format!(
            "{label}:{}: {}",
            p.line, p.message
        )));
    }
    Ok(1)
}

/// Why `dsh repair` cannot fix a problem of a log's complete lines.
const CANNOT_FIX: &str = "it keeps every complete line byte for byte (it only cuts a torn last \
     line and appends what a crash left unanswered), and these problems are in complete lines";

/// The sentence for a log dsh refuses to resume (`--resume`, `--session`) because it breaks
/// the rules repair cannot restore: the first problem with its line and what to do about it,
/// how many more `dsh check` lists, that `dsh repair` cannot fix them and why, and what to do
/// instead.
pub fn unresumable(label: &str, problems: &[dsh::session::Problem]) -> String {
    let first = problems.first().map_or_else(
        || "it breaks the log's rules".to_owned(),
        |p| format!("line {}: {}", p.line, p.message),
    );
    let more = match problems.len() {
        0 | 1 => String::new(),
        n => format!(
            " ({} more problem(s): `dsh check {label}` lists them all)",
            n - 1
        ),
    };
    format!(
        "session log {label} cannot be resumed: {first}{more}. `dsh repair` cannot fix this: \
         {CANNOT_FIX}. Change the lines named, or start a new session (without --resume or \
         --session; this log stays readable with `dsh transcript` and `dsh view`)"
    )
}

/// Prints `LABEL: repaired` and what the repair did.
pub fn print_repair(label: &str, report: &dsh::session::RepairReport) {
    super::out(&format!("{label}: repaired"));
    for line in report_lines(report) {
        super::out(&super::render::sanitize(&line));
    }
}

/// What a repair did, one line per action.
pub fn report_lines(report: &dsh::session::RepairReport) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = &report.torn_tail {
        lines.push(format!(
            "  cut a torn last line ({} bytes at line {})",
            t.bytes, t.line
        ));
    }
    if report.added_newline {
        lines.push("  ended the last line with a newline".to_owned());
    }
    for c in &report.interrupted_calls {
        lines.push(if c.may_have_started {
            format!(
                "  closed call {} (seq {}) with an INTERRUPTED result (it may have run)",
                c.call_id, c.seq
            )
        } else {
            format!(
                "  answered call {} (seq {}) of the assistant message: it was never recorded, so it never ran; wrote its tool/call and an INTERRUPTED result",
                c.call_id, c.seq
            )
        });
    }
    if let Some((turn, step)) = report.closed_step {
        lines.push(format!("  closed step {step} of turn {turn}"));
    }
    if let Some(turn) = report.closed_turn {
        lines.push(format!("  closed turn {turn} (reason interrupted)"));
    }
    lines
}
