//! Helpers to drive the real `dsh` binary: spawn with a deadline, write scripts in both model
//! shapes, and read session logs and `--json` output back as JSON.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// No single invocation may take longer than this (the slowest one sleeps a few hundred ms).
const DEADLINE: Duration = Duration::from_secs(20);

/// The binary under test, with a clean environment: no colour setting, no trace export, and no
/// user configuration directory (nothing from the machine's own settings may change a run).
pub fn dsh() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh"));
    cmd.env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("XDG_CONFIG_HOME", "/nonexistent/dsh-tests-config")
        .env("XDG_STATE_HOME", state_home());
    cmd
}

/// What a finished invocation left.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Both streams, for failure messages.
    pub fn both(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Waits for `child` with the suite's deadline; kills it and panics past the deadline.
pub fn wait(child: Child) -> i32 {
    wait_within(child, DEADLINE)
}

/// Waits for `child` at most `deadline`; kills it and panics past it.
fn wait_within(mut child: Child, deadline: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status
                .code()
                .unwrap_or_else(|| panic!("dsh ended by a signal: {status}"));
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            panic!("dsh did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `cmd` with `stdin` as its whole input (`None`: no input, end of file at once).
pub fn run_with(cmd: &mut Command, stdin: Option<&str>) -> Out {
    run_with_within(cmd, stdin, DEADLINE)
}

/// Runs `cmd` with an empty stdin, allowing it `deadline` (for a run whose waits are part of
/// what it tests, as restarts with backoff are).
pub fn run_within(cmd: &mut Command, deadline: Duration) -> Out {
    run_with_within(cmd, None, deadline)
}

fn run_with_within(cmd: &mut Command, stdin: Option<&str>, deadline: Duration) -> Out {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    let code = wait_within(child, deadline);
    Out {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `cmd` with an empty, closed stdin.
pub fn run(cmd: &mut Command) -> Out {
    run_with(cmd, None)
}

/// `dsh <args>` with an empty stdin.
/// `dsh run SCRIPT --workspace WS --session LOG` with more options.
pub fn run_script(script: &Path, ws: &Path, log: &Path, extra: &[&str]) -> Out {
    let mut args = vec!["run", s(script), "--workspace", s(ws), "--session", s(log)];
    args.extend_from_slice(extra);
    dsh_run(&args)
}

pub fn dsh_run(args: &[&str]) -> Out {
    run(dsh().args(args))
}

/// A child whose stdout is read line by line while it runs.
pub struct Live {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Live {
    /// Spawns `cmd` with stdout piped into a line channel.
    pub fn spawn(cmd: &mut Command) -> Live {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Live {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `pred`; panics past the deadline.
    pub fn until(&mut self, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let left = DEADLINE.saturating_sub(start.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(e) => {
                    let _ = self.child.kill();
                    panic!("no matching line ({e}); saw {:#?}", self.seen);
                }
            }
        }
    }
}

/// One tool call of a script step.
#[derive(Clone, Debug)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// A call for a step.
pub fn call(id: &str, name: &str, args: Value) -> Call {
    Call {
        id: id.into(),
        name: name.into(),
        args,
    }
}

/// One assistant message in the OpenAI Chat Completions shape (arguments as a string).
pub fn openai(text: &str, calls: &[Call]) -> String {
    let mut m = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        m["tool_calls"] = calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.args.to_string()}})
            })
            .collect();
    }
    m.to_string()
}

/// One assistant message in the Anthropic Messages shape (`tool_use` blocks).
pub fn anthropic(text: &str, calls: &[Call]) -> String {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for c in calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}));
    }
    json!({"role": "assistant", "content": content}).to_string()
}

/// Writes a script (one line per step) and returns its path.
pub fn script(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

/// A path as a `&str` argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The events of a log (the header line skipped), parsed.
pub fn events(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The header of a log.
pub fn header(log: &Path) -> Value {
    let text = std::fs::read_to_string(log).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// Events of one type.
pub fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// A tool result as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Res {
    pub call_id: String,
    pub is_error: bool,
    pub text: String,
    pub code: Option<String>,
}

/// The `tool/result` events of a log, in order.
pub fn results(events: &[Value]) -> Vec<Res> {
    of_type(events, "tool/result")
        .into_iter()
        .map(|e| {
            let block = &e["data"]["message"]["content"][0];
            Res {
                call_id: block["toolCallId"].as_str().unwrap().to_owned(),
                is_error: block["isError"].as_bool().unwrap(),
                text: block["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                code: e["data"]["error"]["code"].as_str().map(str::to_owned),
            }
        })
        .collect()
}

/// The result of one call; panics when there is not exactly one.
pub fn result_of(events: &[Value], call_id: &str) -> Res {
    let all: Vec<Res> = results(events)
        .into_iter()
        .filter(|r| r.call_id == call_id)
        .collect();
    assert_eq!(all.len(), 1, "results for {call_id}: {all:?}");
    all.into_iter().next().unwrap()
}

/// The `callId`s of the `tool/call` events, in order.
pub fn call_ids(events: &[Value]) -> Vec<String> {
    of_type(events, "tool/call")
        .into_iter()
        .map(|e| e["data"]["callId"].as_str().unwrap().to_owned())
        .collect()
}

/// Each stdout line of `--json`, parsed (every line must be a JSON object).
pub fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}"));
            assert!(v.is_object(), "not an object: {l}");
            v
        })
        .collect()
}

/// `dsh check LOG` succeeded with the log reported clean.
pub fn assert_checks_clean(log: &Path) {
    let out = dsh_run(&["check", s(log)]);
    assert_eq!(out.code, 0, "{}", out.both());
    assert_eq!(out.stdout.trim(), format!("{}: ok", log.display()));
}

/// Every `tool/call` of the log has exactly one `tool/result` pointing at its seq (I1).
pub fn assert_paired(events: &[Value]) {
    for (seq, e) in events.iter().enumerate() {
        if e["type"] != "tool/call" {
            continue;
        }
        let pointing = events
            .iter()
            .filter(|r| r["type"] == "tool/result" && r["sourceEventSeqs"][0] == seq)
            .count();
        assert_eq!(pointing, 1, "tool/call at seq {seq}: {e}");
    }
    assert_eq!(
        of_type(events, "tool/call").len(),
        of_type(events, "tool/result").len()
    );
}

/// The `$XDG_STATE_HOME` every run of this test binary gets (a folder of its own).
pub fn state_home() -> PathBuf {
    std::env::temp_dir().join(format!("dsh-tests-state-{}", std::process::id()))
}

/// The sessions kept by default for a workspace (under [`state_home`]).
pub fn default_sessions(workspace: &Path) -> Vec<PathBuf> {
    let Ok(ws) = workspace.canonicalize() else {
        return Vec::new();
    };
    let dir = state_home()
        .join("dsh")
        .join("sessions")
        .join(dsh::jsonl::workspace_key(&ws));
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// A fresh temporary directory.
pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A `[permissions]` policy asking for `echo`, allowing `sleep`, denying the rest.
pub const ASK_ECHO: &str =
    "[permissions]\nallow = [\"sleep\"]\nask = [\"echo\"]\ndefault = \"deny\"\n";

/// A mock model provider on a runtime of its own, serving while a test drives the binary
/// (dropped before its runtime).
pub struct MockServer {
    pub mock: dsh_test_support::mock_provider::MockProvider,
    _rt: tokio::runtime::Runtime,
}

/// Starts a [`MockServer`].
pub fn mock_server() -> MockServer {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = rt
        .block_on(dsh_test_support::mock_provider::MockProvider::start())
        .unwrap();
    MockServer { mock, _rt: rt }
}
