//! UI rendering: a live line per running call on a terminal (spinner and elapsed time), replaced
//! by `✓`/`✗`, the tool, a one-line summary of its arguments, its duration and, for failures, the
//! message; compact diffs of edits; plain lines when not a terminal; `--json` prints one JSON
//! object per durable event. Tool output never reaches the terminal unsanitized.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh::core::{ToolExecution, ToolResult};
use dsh::session::{Event, Session, Subscription};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;
use serde_json::Value;

/// Unicode's bidirectional formatting characters: embeddings and overrides (U+202A..U+202E),
/// isolates (U+2066..U+2069) and the marks (U+200E, U+200F, U+061C). They draw nothing, but they
/// reorder what follows them on the line, so a tool's output could make a line read otherwise
/// than it is ("Trojan Source").
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Removes what could drive a terminal or reorder a line: control characters (ANSI escapes
/// included) except newline and tab, and bidirectional controls.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if c.is_control() || is_bidi_control(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// JSON text safe for a terminal: the C1 controls (U+0080..U+009F, which some terminals read
/// as escape sequences even UTF-8 encoded) and the bidirectional controls become `\uXXXX`
/// escapes. serde_json already escapes the C0 controls, and non-ASCII characters appear only
/// inside strings, so the JSON value is unchanged.
pub fn json_for_terminal(text: String) -> String {
    let escaped = |c: char| ('\u{80}'..='\u{9f}').contains(&c) || is_bidi_control(c);
    if !text.chars().any(escaped) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

fn one_line(s: &str, max: usize) -> String {
    let flat = sanitize(s).replace(['\n', '\t'], " ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// A one-line summary of a call's arguments. Arguments may nest thousands of levels, so
/// nothing here copies, prints or drops them by plain recursion.
fn summarize_args(args: &dsh::core::Arguments) -> String {
    let Some(json) = args.json() else {
        return one_line(&Value::String(args.to_text()).to_string(), 60);
    };
    let args = json.value();
    for key in [
        "file_path",
        "pattern",
        "command",
        "text",
        "description",
        "ms",
        "message",
    ] {
        if let Some(v) = args.get(key) {
            return match v {
                Value::String(s) => one_line(s, 60),
                other if dsh::core::json::depth_of(other) <= 64 => one_line(&other.to_string(), 60),
                _ => one_line(&json.to_json_string(), 60),
            };
        }
    }
    one_line(&json.to_json_string(), 60)
}

/// The live display of this process, hidden while a question waits on the terminal.
static LIVE: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// Live lines stay hidden until this is dropped.
pub struct Paused(Option<MultiProgress>);

impl Drop for Paused {
    fn drop(&mut self) {
        if let Some(multi) = &self.0 {
            multi.set_draw_target(ProgressDrawTarget::stdout());
        }
    }
}

/// The live lines of the calls running now, by call id, so that a question can leave them on
/// screen as plain lines.
static RUNNING_LINES: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// Hides the live lines (spinners would redraw over a question on the terminal), leaving what
/// they showed on screen as plain lines: the calls still running stay visible while a person
/// answers.
pub fn pause_live() -> Paused {
    let multi = LIVE.lock().clone();
    if let Some(m) = &multi {
        let _ = m.clear();
        m.set_draw_target(ProgressDrawTarget::hidden());
        for line in RUNNING_LINES.lock().values() {
            super::out(&format!("⋯ {line} (running)"));
        }
    }
    Paused(multi)
}

/// Output mode.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Human lines; `live` adds spinners, `color` adds colours.
    Human { live: bool, color: bool },
    /// One JSON object per durable event on stdout.
    Json,
    /// Plain human lines on stderr (stdout carries a protocol).
    Stderr,
}

impl Mode {
    pub fn detect(json: bool) -> Mode {
        if json {
            return Mode::Json;
        }
        let tty = std::io::stdout().is_terminal();
        Mode::Human {
            live: tty,
            color: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }
}

struct Running {
    started: Instant,
    bar: Option<ProgressBar>,
    /// When a progress line was last printed (without live lines: at most one a second).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    progress_printed: Option<Instant>,
}

#[derive(Default)]
struct Tally {
    calls: usize,
    sub_calls: usize,
    failures: BTreeMap<String, usize>,
    /// Commands that ran and exited non-zero (results, not failures).
    nonzero_exits: usize,
    /// Commands an operation of which the sandbox refused.
    sandbox_denials: usize,
}

/// What a successful result's presentation meta says went wrong inside it: the command's
/// non-zero exit code, and whether the sandbox refused one of its operations.
fn inner_trouble(result: &ToolResult) -> (Option<i64>, bool) {
    let Some(meta) = result.meta().map(|m| m.value()) else {
        return (None, false);
    };
    let exit = meta
        .get("exitCode")
        .and_then(Value::as_i64)
        .filter(|c| *c != 0);
    let denied = meta.get("sandboxDenied").and_then(Value::as_bool) == Some(true);
    (exit, denied)
}

/// The lines of an edit's old and new text that differ, without the context lines both share
/// at their start and end.
fn changed_lines<'a>(old: &'a str, new: &'a str) -> (Vec<&'a str>, Vec<&'a str>) {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (
        a[prefix..a.len() - suffix].to_vec(),
        b[prefix..b.len() - suffix].to_vec(),
    )
}

/// How many sub-call lines of one `run_code` call are shown; the rest fold into one line.
pub const SHOWN_SUB_CALLS: usize = 5;

/// The sub-call lines of one `run_code` call beyond [`SHOWN_SUB_CALLS`].
#[derive(Default)]
struct Fold {
    shown: usize,
    hidden: usize,
    hidden_failed: usize,
}

/// The renderer of one run.
pub struct Renderer {
    mode: Mode,
    multi: MultiProgress,
    running: Mutex<HashMap<String, Running>>,
    /// Sub-call lines per parent execution, until the parent's own line is printed.
    folds: Mutex<HashMap<dsh::core::ExecutionToken, Fold>>,
    tally: Mutex<Tally>,
    /// Result lines waiting for their `tool/result` to be durable.
    deferred: Mutex<Deferred>,
    started: Instant,
}

/// A call's line is printed once its result is in the log, not when the call finished: a
/// result the log refused (the store's lease lost, the disk failed) never reaches the model's
/// history, so it must not read as done on the terminal.
#[derive(Default)]
struct Deferred {
    /// Lines by call id, finished but not yet durable.
    lines: HashMap<String, Finished>,
    /// Call ids whose `tool/result` became durable before their line was made.
    recorded: std::collections::HashSet<String>,
}

/// A finished call's line, and the line to print instead if its result is never recorded.
struct Finished {
    line: String,
    lost: String,
    /// Already counted among the failures (the call itself failed).
    failed: bool,
}

impl Renderer {
    pub fn new(mode: Mode) -> Arc<Renderer> {
        let multi = MultiProgress::with_draw_target(match mode {
            Mode::Human { live: true, .. } => ProgressDrawTarget::stdout(),
            _ => ProgressDrawTarget::hidden(),
        });
        if let Mode::Human { live: true, .. } = mode {
            *LIVE.lock() = Some(multi.clone());
        }
        Arc::new(Renderer {
            mode,
            multi,
            running: Mutex::new(HashMap::new()),
            folds: Mutex::new(HashMap::new()),
            tally: Mutex::new(Tally::default()),
            deferred: Mutex::new(Deferred::default()),
            started: Instant::now(),
        })
    }

    fn println(&self, line: String) {
        match self.mode {
            // Hidden while a question is asked: print plainly rather than lose the line.
            // The live lines are cleared, the finished line is written with its own newline, and
            // they are drawn again below it: `MultiProgress::println` pads a line to the width
            // of the terminal and leaves the newline to line wrapping, so a captured log (`script`,
            // a terminal's scrollback file) read as one long line.
            Mode::Human { live: true, .. } if !self.multi.is_hidden() => {
                self.multi.suspend(|| super::out(&line));
            }
            Mode::Stderr => err_line!("{line}"),
            _ => super::out(&line),
        }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        match self.mode {
            Mode::Human { color: true, .. } => format!("\x1b[{code}m{s}\x1b[0m"),
            _ => s.to_owned(),
        }
    }

    /// Subscribes to the session: call starts (and, with `--json`, every durable event).
    pub fn attach(self: &Arc<Self>, session: &Session) -> Subscription {
        let me = self.clone();
        session.subscribe(move |seq, event| me.on_event(seq, event))
    }

    fn on_event(&self, seq: u64, event: &Event) {
        if self.mode == Mode::Json {
            // The event's own line with `seq` added last: no re-parse (an event may nest deeper
            // than a plain parser allows, and its numbers stay exactly as logged).
            let line = event.to_json_line();
            let text = match line.strip_suffix('}') {
                Some(head) if head.len() > 1 => format!("{head},\"seq\":{seq}}}"),
                _ => format!("{{\"event\":{line},\"seq\":{seq}}}"),
            };
            super::out(&json_for_terminal(text));
        } else if let Some(result) = event.as_tool_result() {
            let finished = {
                let mut d = self.deferred.lock();
                let finished = d.lines.remove(result.call_id);
                if finished.is_none() {
                    d.recorded.insert(result.call_id.to_owned());
                }
                finished
            };
            if let Some(f) = finished {
                self.println(f.line);
            }
            return;
        }
        let Some(call) = event.as_tool_call() else {
            // A Code Mode sub-call has no `tool/call`: its clock starts with its
            // `tool/code-dispatch-start` (its line is printed when it ends, under its program's).
            if event.event_type() == dsh::session::types::CODE_DISPATCH_START
                && let Some(id) = event.sub_call_id()
            {
                self.running.lock().insert(
                    id.to_owned(),
                    Running {
                        started: Instant::now(),
                        bar: None,
                        progress_printed: None,
                    },
                );
            }
            return;
        };
        let args = dsh::core::Arguments::from_raw(call.arguments);
        let bar = match self.mode {
            Mode::Human { live: true, .. } => {
                let bar = self.multi.add(ProgressBar::new_spinner());
                if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                    bar.set_style(style);
                }
                let message = format!("{} {}", one_line(call.name, 40), summarize_args(&args));
                RUNNING_LINES
                    .lock()
                    .insert(call.call_id.to_owned(), message.clone());
                bar.set_message(message);
                bar.enable_steady_tick(Duration::from_millis(100));
                Some(bar)
            }
            _ => None,
        };
        self.running.lock().insert(
            call.call_id.to_owned(),
            Running {
                started: Instant::now(),
                bar,
                progress_printed: None,
            },
        );
    }

    /// A running call's progress (an MCP server's `notifications/progress`): on its live
    /// line, or else as a line of its own, at most one a second per call.
    #[cfg(feature = "mcp")]
    pub fn on_progress(&self, call_id: &str, tool: &str, progress: &str) {
        if self.mode == Mode::Json {
            return;
        }
        let mut running = self.running.lock();
        let Some(call) = running.get_mut(call_id) else {
            return;
        };
        if let Some(bar) = &call.bar {
            if let Some(line) = RUNNING_LINES.lock().get(call_id) {
                bar.set_message(format!("{line} · {progress}"));
            }
            return;
        }
        if call
            .progress_printed
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        call.progress_printed = Some(Instant::now());
        drop(running);
        self.println(format!("⋯ {} {progress}", one_line(tool, 40)));
    }

    /// The `tools/result` observer: one finished line per call.
    pub fn on_result(&self, exec: &ToolExecution, result: &ToolResult) {
        let running = self.running.lock().remove(exec.call_id());
        RUNNING_LINES.lock().remove(exec.call_id());
        let elapsed = running
            .as_ref()
            .map(|r| r.started.elapsed())
            .unwrap_or_default();
        if let Some(bar) = running.and_then(|r| r.bar) {
            bar.finish_and_clear();
        }
        let (exit, denied) = if result.is_error() {
            (None, false)
        } else {
            inner_trouble(result)
        };
        {
            let mut t = self.tally.lock();
            t.nonzero_exits += usize::from(exit.is_some());
            t.sandbox_denials += usize::from(denied);
            if exec.parent().is_some() {
                // A run_code sub-call: counted apart; its outcome reaches the model through the
                // program, not as a result of its own.
                t.sub_calls += 1;
            } else if let Some(e) = result.error() {
                t.calls += 1;
                let code = e.code().unwrap_or("denied or failed").to_owned();
                *t.failures.entry(code).or_default() += 1;
            } else {
                t.calls += 1;
            }
        }
        if self.mode == Mode::Json {
            return;
        }
        // A program may make thousands of sub-calls: the first few are shown, the rest are
        // counted and said in one line before the program's own line.
        if let Some(parent) = exec.parent() {
            let mut folds = self.folds.lock();
            let fold = folds.entry(parent).or_default();
            if fold.shown >= SHOWN_SUB_CALLS {
                fold.hidden += 1;
                fold.hidden_failed += usize::from(result.is_error() || exit.is_some() || denied);
                return;
            }
            fold.shown += 1;
        } else if let Some(fold) = self.folds.lock().remove(&exec.token())
            && fold.hidden > 0
        {
            let failed = match fold.hidden_failed {
                0 => String::new(),
                n => format!(" ({n} failed)"),
            };
            self.println(self.paint("2", &format!("  ↳ … {} more{failed}", fold.hidden)));
        }
        let args = exec.arguments();
        let ms = format!("{}ms", elapsed.as_millis());
        let indent = if exec.parent().is_some() {
            "  ↳ "
        } else {
            ""
        };
        let mut line = if result.is_error() {
            let msg = result
                .error()
                .map(|e| match e.code() {
                    Some(c) => format!("{c}: {}", e.message()),
                    None => e.message().to_owned(),
                })
                .unwrap_or_default();
            format!(
                "{indent}{} {} {}  {}  {}",
                self.paint("31", "✗"),
                one_line(exec.name(), 40),
                summarize_args(args),
                self.paint("2", &ms),
                self.paint("31", &one_line(&msg, 160))
            )
        } else if exit.is_some() || denied {
            // The call ran (its result is not an error) but the command failed or was refused:
            // say so on the line, `✗ exit 3` / `⚠ sandbox`, not with a green tick.
            let (mark, colour) = if denied { ("⚠", "33") } else { ("✗", "31") };
            let mut what = Vec::new();
            if denied {
                what.push("⚠ sandbox".to_owned());
            }
            if let Some(code) = exit {
                what.push(format!("✗ exit {code}"));
            }
            format!(
                "{indent}{} {} {}  {}  {}",
                self.paint(colour, mark),
                one_line(exec.name(), 40),
                summarize_args(args),
                self.paint("2", &ms),
                self.paint(colour, &what.join("  "))
            )
        } else {
            format!(
                "{indent}{} {} {}  {}",
                self.paint("32", "✓"),
                one_line(exec.name(), 40),
                summarize_args(args),
                self.paint("2", &ms)
            )
        };
        if let Some(diffs) = result
            .meta()
            .and_then(|m| m.value().get("diffs"))
            .and_then(Value::as_array)
        {
            for d in diffs {
                let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
                let (removed, added) = changed_lines(text("oldText"), text("newText"));
                for (lines, sign, colour) in [(removed, "-", "31"), (added, "+", "32")] {
                    for l in lines.iter().take(6) {
                        line.push('\n');
                        line.push_str(
                            &self.paint(colour, &format!("    {sign} {}", one_line(l, 100))),
                        );
                    }
                    if lines.len() > 6 {
                        line.push_str(&format!("\n    {sign} … ({} more lines)", lines.len() - 6));
                    }
                }
            }
        }
        // What a sandbox refused (the `bash` tool's `[sandbox: ...]` lines) shows under the call.
        if !result.is_error() {
            let text = result.first_text().unwrap_or_default();
            for note in text.lines().filter(|l| l.starts_with("[sandbox: ")).take(2) {
                line.push('\n');
                line.push_str(&self.paint("33", &format!("    {}", one_line(note, 160))));
            }
        }
        if exec.parent().is_some() {
            // A sub-call's outcome reaches the model through its program's result.
            self.println(line);
            return;
        }
        let lost = format!(
            "{} {} {}  {}  {}",
            self.paint("31", "✗"),
            one_line(exec.name(), 40),
            summarize_args(args),
            self.paint("2", &ms),
            self.paint(
                "31",
                "its result was not recorded in the session log: the model never sees it"
            )
        );
        let now = {
            let mut d = self.deferred.lock();
            let recorded = d.recorded.remove(exec.call_id());
            if !recorded {
                d.lines.insert(
                    exec.call_id().to_owned(),
                    Finished {
                        line,
                        lost,
                        failed: result.is_error(),
                    },
                );
                return;
            }
            line
        };
        self.println(now);
    }

    /// Prints the line of every call whose result never became durable, as failed, and counts
    /// it among the failures. Called at the end of a run, whether or not it succeeded.
    pub fn flush_unrecorded(&self) {
        let lost: Vec<Finished> = self.deferred.lock().lines.drain().map(|(_, f)| f).collect();
        if lost.is_empty() {
            return;
        }
        let newly_failed = lost.iter().filter(|f| !f.failed).count();
        if newly_failed > 0 {
            let mut t = self.tally.lock();
            *t.failures.entry("not recorded".to_owned()).or_default() += newly_failed;
        }
        for f in lost {
            self.println(f.lost);
        }
    }

    /// The closing summary: calls, failures by code, wall time. Prints the lines of results
    /// never recorded first ([`Renderer::flush_unrecorded`]).
    pub fn summary(&self) -> String {
        self.flush_unrecorded();
        let t = self.tally.lock();
        let failed: usize = t.failures.values().sum();
        let subs = match t.sub_calls {
            0 => String::new(),
            1 => " (+1 run_code sub-call)".to_owned(),
            n => format!(" (+{n} run_code sub-calls)"),
        };
        let mut s = format!(
            "{} call{}{subs}, {} failed, {:.2}s",
            t.calls,
            if t.calls == 1 { "" } else { "s" },
            failed,
            self.started.elapsed().as_secs_f64()
        );
        if !t.failures.is_empty() {
            let parts: Vec<String> = t
                .failures
                .iter()
                .map(|(c, n)| format!("{c} ×{n}"))
                .collect();
            s.push_str(&format!(" ({})", parts.join(", ")));
        }
        let mut inner = Vec::new();
        if t.nonzero_exits > 0 {
            inner.push(format!(
                "{} command{} exited non-zero",
                t.nonzero_exits,
                if t.nonzero_exits == 1 { "" } else { "s" }
            ));
        }
        if t.sandbox_denials > 0 {
            inner.push(format!(
                "{} sandbox denial{}",
                t.sandbox_denials,
                if t.sandbox_denials == 1 { "" } else { "s" }
            ));
        }
        if !inner.is_empty() {
            s.push_str(&format!("; {}", inner.join(", ")));
        }
        s
    }
}
