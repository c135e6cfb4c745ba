//! The scripted session (a long script of reads, writes, edits and wide parallel steps, with
//! every state each file may pass through) and running `dsh run --json` on it, killed or not.

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
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
pub(super) struct FileStates {
    pub(super) path: String,
    pub(super) states: Vec<(Option<String>, Option<String>)>,
}

/// The scripted session and what it may leave in the workspace.
#[derive(Clone, Debug)]
pub struct Session {
    /// The script (JSON Lines, OpenAI and Anthropic shapes).
    pub script: String,
    pub(super) files: Vec<FileStates>,
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

/// A session kept in a PostgreSQL store instead of `log.jsonl`: the store's URL and the id.
#[derive(Clone, Debug)]
pub struct StoreSession {
    /// `postgres://...`
    pub url: String,
    /// The session id in the store.
    pub id: String,
}

/// Starts the session in `dir` and kills it after `delay` (`None`: lets it finish).
#[allow(dead_code, reason = "the root test suite's kill trials call it")]
pub fn run_session(dsh: &Path, dir: &Path, delay: Option<Duration>) -> Result<Outcome, String> {
    run_session_at(dsh, dir, delay, None)
}

/// [`run_session`], the log kept in `store` when given (`--store URL --session ID`).
pub fn run_session_at(
    dsh: &Path,
    dir: &Path,
    delay: Option<Duration>,
    store: Option<&StoreSession>,
) -> Result<Outcome, String> {
    let mut cmd = Command::new(dsh);
    cmd.arg("run")
        .arg(dir.join("script.jsonl"))
        .args(["--json", "--demo-tools", "--workspace"])
        .arg(dir.join("ws"))
        .env_remove("DSH_STORE");
    match store {
        Some(s) => cmd.args(["--store", &s.url, "--session", &s.id]),
        None => cmd.arg("--session").arg(dir.join("log.jsonl")),
    };
    let mut child = cmd
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

pub(super) fn dsh_cmd(dsh: &Path, args: &[&str], log: &Path) -> Result<(i32, String), String> {
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
