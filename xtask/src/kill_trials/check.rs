//! Judging one run: the repaired log is clean and pairs every call, the printed events are all
//! in it, every file holds one whole state the log agrees with, no temporary file is left.

use std::collections::HashMap;
use std::path::Path;

use super::run::{Outcome, Session, dsh_cmd};
use serde_json::Value;

/// What the log says about one call.
#[derive(Clone, Copy, Default)]
struct CallFate {
    called: bool,
    /// `Some(true)` a success, `Some(false)` a failure that did not run or changed nothing.
    succeeded: Option<bool>,
}

/// What one run's checks counted.
#[derive(Default)]
pub struct RunStats {
    /// Killed before the log had its header.
    pub before_log: bool,
    /// The log needed repair.
    pub repaired: bool,
    /// Calls closed as INTERRUPTED.
    pub interrupted: usize,
    /// Calls whose `tool/call` repair had to write.
    pub never_recorded: usize,
    /// Printed events checked.
    pub events: usize,
    /// Files checked.
    pub files: usize,
    /// Stray temp files.
    pub stray: usize,
}

/// Checks one run's directory after the process is gone; returns what failed.
#[allow(dead_code, reason = "the root test suite's kill trials call it")]
pub fn check_run(
    dsh: &Path,
    dir: &Path,
    session: &Session,
    outcome: &Outcome,
    stats: &mut RunStats,
) -> Vec<String> {
    check_run_at(dsh, dir, session, outcome, stats, None)
}

/// [`check_run`] for a session kept in `store` when given: `dsh repair --store` and `dsh check
/// --store` on it, then `dsh export --store` into `log.jsonl` (none when the session was never
/// created), which the file checks then read.
pub fn check_run_at(
    dsh: &Path,
    dir: &Path,
    session: &Session,
    outcome: &Outcome,
    stats: &mut RunStats,
    store: Option<&super::run::StoreSession>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let log = dir.join("log.jsonl");
    if let Some(s) = store {
        reasons.extend(from_store(dsh, s, &log, stats));
    }
    // The printed events: only complete lines (a line cut by the kill was never whole).
    let complete = outcome
        .stdout
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let printed: Vec<&[u8]> = outcome.stdout[..complete]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let has_header = std::fs::read(&log)
        .map(|b| b.contains(&b'\n'))
        .unwrap_or(false);
    if !has_header {
        stats.before_log = true;
        if !printed.is_empty() {
            reasons.push(format!(
                "{} events were printed but the log has no header",
                printed.len()
            ));
        }
        if !outcome.killed {
            reasons.push(format!("the run ended ({}) without a log", outcome.status));
        }
    }
    if !outcome.killed && outcome.status != "exit status: 0" {
        reasons.push(format!(
            "an unkilled run failed ({}): {}",
            outcome.status,
            String::from_utf8_lossy(&outcome.stderr).trim()
        ));
    }
    // (a) repair, then check (for a store: done on the store above; the export is clean).
    if log.exists() && store.is_none() {
        match dsh_cmd(dsh, &["repair"], &log) {
            Ok((0, text)) => {
                if text.contains(": repaired") {
                    stats.repaired = true;
                }
                stats.never_recorded = text.matches("  answered call ").count();
            }
            Ok((code, text)) => reasons.push(format!("dsh repair exited {code}: {text}")),
            Err(e) => reasons.push(e),
        }
        match dsh_cmd(dsh, &["check"], &log) {
            Ok((0, _)) => {}
            Ok((code, text)) => reasons.push(format!("dsh check exited {code}: {text}")),
            Err(e) => reasons.push(e),
        }
    }
    let bytes = std::fs::read(&log).unwrap_or_default();
    let parsed = match dsh_session::read_log(&bytes) {
        Ok(l) => l,
        Err(e) => {
            reasons.push(format!("the repaired log does not read: {e}"));
            return reasons;
        }
    };
    // (a') what a model would be sent: every call it made answered once, in histories the
    // providers' APIs accept.
    let messages = dsh_session::derive_messages_from(parsed.events.iter().map(|(s, e)| (*s, e)));
    reasons.extend(model_visible_problems(&messages));
    // (b) every printed event is in the log, at its seq, with the same content.
    let by_seq: HashMap<u64, &dsh_session::Event> =
        parsed.events.iter().map(|(s, e)| (*s, e)).collect();
    let mut last: Option<u64> = None;
    for line in &printed {
        stats.events += 1;
        let mut v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                reasons.push(format!("a printed line is not JSON: {e}"));
                continue;
            }
        };
        let Some(seq) = v
            .as_object_mut()
            .and_then(|m| m.remove("seq"))
            .and_then(|s| s.as_u64())
        else {
            reasons.push("a printed event has no seq".to_owned());
            continue;
        };
        if last.is_some_and(|l| seq != l + 1) || (last.is_none() && seq != 0) {
            reasons.push(format!(
                "printed seqs are not consecutive: {last:?} then {seq}"
            ));
        }
        last = Some(seq);
        match by_seq.get(&seq) {
            None => reasons.push(format!("printed event seq {seq} is not in the log")),
            Some(e) => {
                let logged: Value = serde_json::from_str(&e.to_json_line()).unwrap_or(Value::Null);
                if logged != v {
                    reasons.push(format!(
                        "printed event seq {seq} differs from the log: printed {v}, logged {logged}"
                    ));
                }
            }
        }
    }
    // What the log says about each call.
    let mut fates: HashMap<String, CallFate> = HashMap::new();
    for (_, e) in &parsed.events {
        if let Some(c) = e.as_tool_call() {
            fates.entry(c.call_id.to_owned()).or_default().called = true;
        } else if let Some(r) = e.as_tool_result() {
            let interrupted =
                r.error.and_then(|e| e.get("code")).and_then(Value::as_str) == Some("INTERRUPTED");
            let fate = fates.entry(r.call_id.to_owned()).or_default();
            if !interrupted {
                fate.succeeded = Some(r.is_error != Some(true));
            }
        }
    }
    stats.interrupted = parsed
        .events
        .iter()
        .filter(|(_, e)| {
            e.as_tool_result()
                .and_then(|r| r.error)
                .and_then(|e| e.get("code"))
                .and_then(Value::as_str)
                == Some("INTERRUPTED")
        })
        .count();
    // (c) each file holds one whole state, and the log agrees with it.
    let ws = dir.join("ws");
    for f in &session.files {
        stats.files += 1;
        let actual = std::fs::read(ws.join(&f.path)).ok();
        let actual = actual.map(|b| String::from_utf8_lossy(&b).into_owned());
        if !f.states.iter().any(|(_, s)| *s == actual) {
            reasons.push(format!(
                "{} holds none of the script's states (half-written?): {} bytes",
                f.path,
                actual.map_or(0, |a| a.len())
            ));
            continue;
        }
        // The last state whose call the log shows as a success (or the original); a later
        // state is allowed only through calls the log shows started but never answered (in
        // flight at the kill, closed by repair as INTERRUPTED).
        let settled = f
            .states
            .iter()
            .rposition(|(c, _)| {
                c.as_ref()
                    .is_none_or(|c| fates.get(c).and_then(|f| f.succeeded) == Some(true))
            })
            .unwrap_or(0);
        let in_flight = |c: &Option<String>| {
            c.as_ref().is_some_and(|c| {
                fates
                    .get(c)
                    .is_some_and(|f| f.called && f.succeeded.is_none())
            })
        };
        let reachable = f.states[settled..]
            .iter()
            .enumerate()
            .take_while(|(i, (c, _))| *i == 0 || in_flight(c))
            .any(|(_, (_, s))| *s == actual);
        if !reachable {
            reasons.push(format!(
                "{} holds a whole state, but not one the log allows (the log settles it at state {settled} of {})",
                f.path,
                f.states.len()
            ));
        }
    }
    stats.stray = count_stray(&ws);
    reasons
}

/// What is wrong with a history a model would be sent: a call of an assistant message without
/// exactly one result, or an export a provider's API would refuse.
pub fn model_visible_problems(messages: &[dsh_core::Json]) -> Vec<String> {
    let mut reasons = Vec::new();
    let mut answers: HashMap<String, usize> = HashMap::new();
    for m in messages.iter().map(|m| m.value()) {
        for b in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = |k: &str| {
                b.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            match b.get("type").and_then(Value::as_str) {
                Some("tool-call") => {
                    answers.entry(id("id")).or_insert(0);
                }
                Some("tool-result") => match answers.get_mut(&id("toolCallId")) {
                    Some(n) => *n += 1,
                    None => reasons.push(format!(
                        "the history answers call {} which no assistant message made",
                        id("toolCallId")
                    )),
                },
                _ => {}
            }
        }
    }
    let mut unanswered: Vec<_> = answers.iter().filter(|(_, n)| **n != 1).collect();
    unanswered.sort();
    for (id, n) in unanswered {
        reasons.push(format!(
            "the model's call {id} has {n} results in the history"
        ));
    }
    let openai = dsh_session::to_openai(messages);
    if let Err(e) = dsh_test_support::api_history::openai_accepts(openai.value()) {
        reasons.push(format!("OpenAI would refuse the exported history: {e}"));
    }
    let anthropic = dsh_session::to_anthropic(messages);
    if let Err(e) = dsh_test_support::api_history::anthropic_accepts(anthropic.value()) {
        reasons.push(format!("Anthropic would refuse the exported history: {e}"));
    }
    reasons
}

fn count_stray(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                count_stray(&p)
            } else {
                usize::from(e.file_name().to_string_lossy().ends_with(".dsh-tmp"))
            }
        })
        .sum()
}

/// Repairs and checks a stored session, then exports it to `log`.
fn from_store(
    dsh: &Path,
    s: &super::run::StoreSession,
    log: &Path,
    stats: &mut RunStats,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let store = |command: &str| {
        std::process::Command::new(dsh)
            .args([command, "--store", &s.url, &s.id])
            .env_remove("DSH_STORE")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot start dsh {command}: {e}"))
    };
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
        .trim()
        .to_owned()
    };
    match store("repair") {
        Ok(o) if o.status.success() => {
            let t = text(&o);
            stats.repaired = t.contains(": repaired");
            stats.never_recorded = t.matches("  answered call ").count();
        }
        // Killed before the session was created: nothing to repair, no log.
        Ok(o) if text(&o).contains("no session") => return reasons,
        Ok(o) => reasons.push(format!(
            "dsh repair --store exited {}: {}",
            o.status,
            text(&o)
        )),
        Err(e) => reasons.push(e),
    }
    match store("check") {
        Ok(o) if o.status.success() => {}
        Ok(o) => reasons.push(format!(
            "dsh check --store exited {}: {}",
            o.status,
            text(&o)
        )),
        Err(e) => reasons.push(e),
    }
    match store("export") {
        Ok(o) if o.status.success() => {
            if let Err(e) = std::fs::write(log, &o.stdout) {
                reasons.push(format!("{}: {e}", log.display()));
            }
        }
        Ok(o) => reasons.push(format!(
            "dsh export --store exited {}: {}",
            o.status,
            text(&o)
        )),
        Err(e) => reasons.push(e),
    }
    reasons
}
