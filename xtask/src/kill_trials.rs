//! Kill trials: `dsh run --json` on a long scripted session, killed with SIGKILL at a random
//! instant, then checked: (a) `dsh repair` + `dsh check` leave a clean log, in which every call
//! of every assistant message has exactly one result, and whose exports (OpenAI and Anthropic)
//! the providers' APIs would accept as request history, (b) every event that
//! `--json` printed before the kill is in the log with the same seq and content, (c) every file
//! the script writes holds one whole state the script could have produced (or its original), and
//! that state agrees with the log.
//!
//! Shared by `cargo xtask kill-trials` and the root test suite (which includes this file by
//! path), so it uses only std, `serde_json`, `dsh_session` and `dsh_test_support`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How a series of trials runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `dsh` binary.
    pub dsh: PathBuf,
    /// How many killed runs.
    pub runs: usize,
    /// How many steps the scripted session has (each step is one assistant message).
    pub steps: usize,
    /// The seed of the kill instants (the script itself does not depend on it).
    pub seed: u64,
    /// Where run directories go (a failing run's directory is kept for inspection).
    pub base: PathBuf,
}

/// One failed run.
#[derive(Clone, Debug)]
pub struct RunFailure {
    /// The run's number (0-based).
    pub run: usize,
    /// How long after the start the kill was sent.
    pub delay: Duration,
    /// The run's directory (kept).
    pub dir: PathBuf,
    /// Every check that failed.
    pub reasons: Vec<String>,
}

/// What a series of trials found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Runs done.
    pub runs: usize,
    /// Runs whose process was killed (the others finished before the kill instant).
    pub killed: usize,
    /// Runs killed before the log held its header (nothing printed, nothing to repair).
    pub before_log: usize,
    /// Runs whose log needed repair (a torn line or calls, step or turn left open).
    pub repaired: usize,
    /// Calls closed by repair with an `INTERRUPTED` result, over all runs.
    pub interrupted_calls: usize,
    /// Of those, calls the model made whose `tool/call` was never recorded (repair wrote it).
    pub never_recorded_calls: usize,
    /// Events printed by `--json` and found in the log, over all runs.
    pub events_checked: usize,
    /// Files compared with the script's states, over all runs.
    pub files_checked: usize,
    /// Stray temp files (`.<name>.*.dsh-tmp`) an atomic write left when killed mid-write.
    pub stray_temp_files: usize,
    /// How long an unkilled session takes (the kill instants are drawn up to this).
    pub session_time: Duration,
    /// Wall time of the whole series.
    pub wall_time: Duration,
    /// The failed runs.
    pub failures: Vec<RunFailure>,
}

impl Report {
    /// One-paragraph summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} runs, {} failures; {} killed mid-session ({} before the log had its header), {} finished first; {} logs repaired ({} calls closed as INTERRUPTED, {} of them never recorded before the kill); {} printed events and {} files checked; {} stray temp files; session {:.0} ms unkilled; wall {:.1} s",
            self.runs,
            self.failures.len(),
            self.killed,
            self.before_log,
            self.runs - self.killed,
            self.repaired,
            self.interrupted_calls,
            self.never_recorded_calls,
            self.events_checked,
            self.files_checked,
            self.stray_temp_files,
            self.session_time.as_secs_f64() * 1e3,
            self.wall_time.as_secs_f64(),
        );
        for f in self.failures.iter().take(20) {
            let _ = write!(
                s,
                "\n  run {} (kill at {} ms, kept in {}):",
                f.run,
                f.delay.as_millis(),
                f.dir.display()
            );
            for r in &f.reasons {
                let _ = write!(s, "\n    - {r}");
            }
        }
        s
    }
}

/// A small deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A seed from the clock.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The file present before the session starts (the script reads it, then rewrites it).
const ORIGINAL: (&str, &str) = (
    "orig.txt",
    "the original text\nof a file the session rewrites\n",
);

/// How many calls the wide parallel steps make.
pub const WIDE_STEP: usize = 30;

/// Every state one file may be in: its original (`None` call: absent, or the pre-existing
/// text), then each write or edit of the script, in order.
#[derive(Clone, Debug)]
struct FileStates {
    path: String,
    states: Vec<(Option<String>, Option<String>)>,
}

/// The scripted session and what it may leave in the workspace.
#[derive(Clone, Debug)]
pub struct Session {
    /// The script (JSON Lines, OpenAI and Anthropic shapes).
    pub script: String,
    files: Vec<FileStates>,
}

fn openai_call(id: &str, name: &str, args: &Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

fn contents(step: usize, lines: usize) -> String {
    let mut s = format!("== write {step} ==\n");
    for i in 0..lines {
        let _ = writeln!(
            s,
            "step {step} line {i}: the quick brown fox jumps over the lazy dog"
        );
    }
    s
}

/// Builds a session of `steps` steps: parallel batches (echo, sleep), exclusive writes and edits
/// (mixed with parallel calls in one message), a read then rewrite of a pre-existing file, and
/// sleeps alone.
pub fn build_session(steps: usize) -> Session {
    let names = ["a.txt", "b.txt", "nested/dir/c.txt", ORIGINAL.0];
    let mut files: Vec<FileStates> = names
        .iter()
        .map(|n| FileStates {
            path: (*n).to_owned(),
            states: vec![(None, (*n == ORIGINAL.0).then(|| ORIGINAL.1.to_owned()))],
        })
        .collect();
    let mut lines = Vec::new();
    for k in 0..steps {
        let id = |j: usize| format!("s{k}_{j}");
        let line = match k % 5 {
            0 => {
                // A wide parallel step: a crash may fall after its message and before most of
                // its calls were recorded.
                let mut calls = vec![
                    openai_call(&id(0), "echo", &json!({"text": format!("step {k}")})),
                    openai_call(&id(1), "sleep", &json!({"ms": 10 + (k % 3) * 5})),
                    openai_call(&id(2), "echo", &json!({"text": "\u{1b}[2Jcontrol\u{7}"})),
                    openai_call(&id(3), "sleep", &json!({"ms": 5})),
                ];
                calls.extend((4..WIDE_STEP).map(|j| match j % 2 {
                    0 => openai_call(&id(j), "echo", &json!({"text": format!("wide {j}")})),
                    _ => openai_call(&id(j), "sleep", &json!({"ms": 1 + j % 4})),
                }));
                json!({"role": "assistant", "content": format!("batch {k}"), "tool_calls": calls})
            }
            1 => {
                let f = (k / 5) % 3;
                let text = contents(k, 40 + (k * 7) % 120);
                files[f].states.push((Some(id(1)), Some(text.clone())));
                let calls = vec![
                    openai_call(&id(0), "echo", &json!({"text": "before the write"})),
                    openai_call(
                        &id(1),
                        "write",
                        &json!({"file_path": names[f], "content": text}),
                    ),
                    openai_call(&id(2), "sleep", &json!({"ms": 5})),
                ];
                json!({"role": "assistant", "tool_calls": calls})
            }
            2 => {
                let f = (k / 5) % 3;
                let before = files[f]
                    .states
                    .last()
                    .and_then(|s| s.1.clone())
                    .unwrap_or_default();
                let old = format!("== write {} ==", k - 1);
                let new = format!("== edited at step {k} ==");
                let after = before.replacen(&old, &new, 1);
                files[f].states.push((Some(id(0)), Some(after)));
                json!({"role": "assistant", "content": [
                    {"type": "text", "text": "editing"},
                    {"type": "tool_use", "id": id(0), "name": "edit",
                     "input": {"file_path": names[f], "old_string": old, "new_string": new}},
                    {"type": "tool_use", "id": id(1), "name": "echo", "input": {"text": "after"}}
                ]})
            }
            3 => {
                let calls = vec![openai_call(&id(0), "sleep", &json!({"ms": 25}))];
                json!({"role": "assistant", "content": "waiting", "tool_calls": calls})
            }
            _ => {
                let text = format!("rewritten at step {k}\n{}", contents(k, 30));
                files[3].states.push((Some(id(1)), Some(text.clone())));
                let calls = vec![
                    openai_call(&id(0), "read", &json!({"file_path": ORIGINAL.0})),
                    openai_call(
                        &id(1),
                        "write",
                        &json!({"file_path": ORIGINAL.0, "content": text}),
                    ),
                ];
                json!({"role": "assistant", "tool_calls": calls})
            }
        };
        lines.push(line.to_string());
    }
    lines.push(json!({"role": "assistant", "content": "done"}).to_string());
    Session {
        script: lines.join("\n") + "\n",
        files,
    }
}

/// Prepares a run directory: the script, an empty workspace with the original file.
pub fn prepare_dir(dir: &Path, session: &Session) -> Result<(), String> {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).map_err(|e| format!("create {}: {e}", ws.display()))?;
    std::fs::write(ws.join(ORIGINAL.0), ORIGINAL.1).map_err(|e| format!("write original: {e}"))?;
    std::fs::write(dir.join("script.jsonl"), &session.script)
        .map_err(|e| format!("write script: {e}"))
}

/// How a run ended.
pub struct Outcome {
    /// Whether SIGKILL ended it.
    pub killed: bool,
    /// Everything it printed on stdout.
    pub stdout: Vec<u8>,
    /// Everything it printed on stderr.
    pub stderr: Vec<u8>,
    /// Its exit status, as text.
    pub status: String,
}

/// Starts the session in `dir` and kills it after `delay` (`None`: lets it finish).
pub fn run_session(dsh: &Path, dir: &Path, delay: Option<Duration>) -> Result<Outcome, String> {
    let mut child = Command::new(dsh)
        .arg("run")
        .arg(dir.join("script.jsonl"))
        .args(["--json", "--demo-tools", "--workspace"])
        .arg(dir.join("ws"))
        .arg("--session")
        .arg(dir.join("log.jsonl"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", dsh.display()))?;
    let mut out = child.stdout.take().ok_or("no stdout")?;
    let mut err = child.stderr.take().ok_or("no stderr")?;
    // Drained on their own threads so a full pipe never stalls the session.
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let mut killed = false;
    if let Some(delay) = delay {
        loop {
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            let left = delay.saturating_sub(started.elapsed());
            if left.is_zero() {
                child.kill().map_err(|e| format!("kill: {e}"))?;
                killed = true;
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(2)));
        }
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    // A kill that raced the exit: the status tells.
    let killed = killed && !status.success() && status.code().is_none();
    let stdout = out_reader.join().map_err(|_| "stdout reader panicked")?;
    let stderr = err_reader.join().map_err(|_| "stderr reader panicked")?;
    Ok(Outcome {
        killed,
        stdout,
        stderr,
        status: status.to_string(),
    })
}

fn dsh_cmd(dsh: &Path, args: &[&str], log: &Path) -> Result<(i32, String), String> {
    let out = Command::new(dsh)
        .args(args)
        .arg(log)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start dsh {}: {e}", args.join(" ")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.code().unwrap_or(-1), text.trim().to_owned()))
}

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
pub fn check_run(
    dsh: &Path,
    dir: &Path,
    session: &Session,
    outcome: &Outcome,
    stats: &mut RunStats,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let log = dir.join("log.jsonl");
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
    // (a) repair, then check.
    if log.exists() {
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
    let messages = dsh_session::derive_messages_from(parsed.events.iter().map(|(s, e)| (*s, &**e)));
    reasons.extend(model_visible_problems(&messages));
    // (b) every printed event is in the log, at its seq, with the same content.
    let by_seq: HashMap<u64, &dsh_session::Event> =
        parsed.events.iter().map(|(s, e)| (*s, &**e)).collect();
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

/// Runs the session once unkilled (it must finish clean), then `cfg.runs` killed runs; calls
/// `progress` after each run.
pub fn run_trials(cfg: &Config, mut progress: impl FnMut(&Report)) -> Result<Report, String> {
    let started = Instant::now();
    let session = build_session(cfg.steps);
    std::fs::create_dir_all(&cfg.base).map_err(|e| format!("{}: {e}", cfg.base.display()))?;
    let mut report = Report::default();
    // The calibration run: it must pass every check, and it measures the session.
    let dir = cfg.base.join("calibration");
    let _ = std::fs::remove_dir_all(&dir);
    prepare_dir(&dir, &session)?;
    let t = Instant::now();
    let outcome = run_session(&cfg.dsh, &dir, None)?;
    report.session_time = t.elapsed();
    let mut stats = RunStats::default();
    let reasons = check_run(&cfg.dsh, &dir, &session, &outcome, &mut stats);
    if !reasons.is_empty() {
        return Err(format!(
            "the unkilled session does not pass its own checks (kept in {}):\n  {}",
            dir.display(),
            reasons.join("\n  ")
        ));
    }
    let has_failure = String::from_utf8_lossy(&outcome.stdout).contains("\"isError\":true");
    if has_failure {
        return Err(format!(
            "the unkilled session has a failed call (kept in {})",
            dir.display()
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut rng = Rng::new(cfg.seed);
    let span = (report.session_time.as_micros() as u64).max(1);
    for run in 0..cfg.runs {
        let dir = cfg.base.join(format!("run-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        prepare_dir(&dir, &session)?;
        // Up to 5% past the measured time, so some runs finish before the kill.
        let delay = Duration::from_micros(rng.below(span + span / 20));
        let outcome = run_session(&cfg.dsh, &dir, Some(delay))?;
        let mut stats = RunStats::default();
        let reasons = check_run(&cfg.dsh, &dir, &session, &outcome, &mut stats);
        report.runs += 1;
        report.killed += usize::from(outcome.killed);
        report.before_log += usize::from(stats.before_log);
        report.repaired += usize::from(stats.repaired);
        report.interrupted_calls += stats.interrupted;
        report.never_recorded_calls += stats.never_recorded;
        report.events_checked += stats.events;
        report.files_checked += stats.files;
        report.stray_temp_files += stats.stray;
        if reasons.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            report.failures.push(RunFailure {
                run,
                delay,
                dir,
                reasons,
            });
        }
        report.wall_time = started.elapsed();
        progress(&report);
    }
    report.wall_time = started.elapsed();
    Ok(report)
}

/// `cargo xtask kill-trials [--runs N] [--steps N] [--seed N] [--release]`: builds `dsh` once,
/// runs the trials and prints the report; an error if any run failed.
pub fn cli(args: &[String]) -> Result<(), String> {
    let mut runs = 100usize;
    let mut steps = 40usize;
    let mut seed = clock_seed();
    let mut release = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            it.next()
                .ok_or(format!("{name} needs a value"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {e}"))
        };
        match a.as_str() {
            "--runs" => runs = number("--runs")? as usize,
            "--steps" => steps = number("--steps")? as usize,
            "--seed" => seed = number("--seed")?,
            "--release" => release = true,
            "-h" | "--help" => {
                println!(
                    "usage: cargo xtask kill-trials [--runs N (100)] [--steps N (40)] [--seed N] [--release]"
                );
                return Ok(());
            }
            other => return Err(format!("unknown option `{other}` (see --help)")),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent folder")?
        .to_path_buf();
    let mut build = Command::new("cargo");
    build
        .current_dir(&root)
        .args(["build", "-p", "dsh", "--bin", "dsh"]);
    if release {
        build.arg("--release");
    }
    eprintln!(
        "$ cargo build -p dsh --bin dsh{}",
        if release { " --release" } else { "" }
    );
    let status = build.status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("building dsh failed".to_owned());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let dsh = target
        .join(if release { "release" } else { "debug" })
        .join("dsh");
    let base = std::env::temp_dir().join(format!("dsh-kill-trials-{}", std::process::id()));
    // A private copy: a rebuild of the workspace during the trials must not swap the binary.
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let copy = base.join("dsh");
    std::fs::copy(&dsh, &copy).map_err(|e| format!("copy {}: {e}", dsh.display()))?;
    let cfg = Config {
        dsh: copy,
        runs,
        steps,
        seed,
        base: base.clone(),
    };
    eprintln!(
        "kill trials: {runs} runs of a {steps}-step session, seed {seed}, in {}",
        base.display()
    );
    let report = run_trials(&cfg, |r| {
        if r.runs % 50 == 0 || r.runs == runs {
            eprintln!(
                "  {} / {runs} runs, {} failures, {:.0} s",
                r.runs,
                r.failures.len(),
                r.wall_time.as_secs_f64()
            );
        }
    })?;
    println!("{}", report.summary());
    println!(
        "seed {seed}; reproduce with `cargo xtask kill-trials --runs {runs} --steps {steps} --seed {seed}`"
    );
    if report.failures.is_empty() {
        let _ = std::fs::remove_dir_all(&base);
        Ok(())
    } else {
        Err(format!(
            "{} of {} runs failed (their directories are kept under {})",
            report.failures.len(),
            report.runs,
            base.display()
        ))
    }
}
