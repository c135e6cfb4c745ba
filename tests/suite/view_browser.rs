//! `dsh view` in a real browser: Debian's headless Chromium driven over WebDriver
//! (`chromedriver`, the `fantoccini` client). The page loads the demo's session and reference
//! harness logs, draws one waterfall bar per call, shows a call's result when it is clicked, and
//! gains rows when a running session's log grows (pushed as Server-Sent Events; asked for when the
//! browser has no EventSource); a PostgreSQL store's sessions are shown and followed the same way; a
//! session no process writes any more shows the calls it left without a result and what answers
//! them, and its repair once it is done. These tests FAIL when Chromium or chromedriver
//! is missing (`apt-get install chromium chromium-driver`; `cargo xtask test` installs them).
//!
//! `DSH_VIEW_SCREENSHOTS=DIR` also writes the screenshots there (how `docs/view-*.png` are made).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::support::*;
use super::view::{Viewer, demo_log};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const PATIENCE: Duration = Duration::from_secs(20);

/// A chromedriver in a process group of its own (killed whole when dropped, the browser
/// included) and a WebDriver session on a fresh profile.
struct Browser {
    driver: Child,
    client: Option<Client>,
    _profile: tempfile::TempDir,
}

/// `path` (or `$DSH_CHROMIUM` / `$DSH_CHROMEDRIVER`), which must be there.
fn installed(path: &str, what: &str) -> String {
    let path = std::env::var(format!("DSH_{}", what.to_uppercase())).unwrap_or(path.to_owned());
    require(&path, what);
    path
}

/// Fails, naming what is missing and how to install it.
fn require(path: &str, what: &str) {
    assert!(
        Path::new(path).is_file(),
        "{what} is missing ({path}): `apt-get install chromium chromium-driver` (`cargo xtask test` installs them)"
    );
}

#[test]
#[should_panic(expected = "chromium is missing (/nonexistent/chromium): `apt-get install chromium")]
fn view_browser_tests_fail_naming_what_is_missing() {
    require("/nonexistent/chromium", "chromium");
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Browser {
    async fn start() -> Browser {
        let chromium = installed(CHROMIUM, "chromium");
        let chromedriver = installed(CHROMEDRIVER, "chromedriver");
        let port = free_port();
        let mut cmd = Command::new(&chromedriver);
        cmd.arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let driver = cmd.spawn().unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let start = Instant::now();
        let client = loop {
            let attempt =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&url)
                    .await;
            match attempt {
                Ok(c) => break c,
                Err(e) if start.elapsed() > PATIENCE => panic!("chromedriver at {url}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        Browser {
            driver,
            client: Some(client),
            _profile: profile,
        }
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    async fn js(&self, script: &str) -> Value {
        self.c().execute(script, vec![]).await.unwrap()
    }

    /// Waits until `script` returns something `done` accepts; that value.
    async fn until(&self, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let v = self.js(script).await;
            if done(&v) {
                return v;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "gave up waiting: {script} is {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        self.c()
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// The text of the first element matching `css`, once there is one.
    async fn text(&self, css: &str) -> String {
        let js = format!(
            "const e = document.querySelector({}); return e ? e.textContent : null;",
            json!(css)
        );
        self.until(&js, Value::is_string)
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A screenshot, checked to be a PNG of some size, kept under `dir` and (when set) under
    /// `$DSH_VIEW_SCREENSHOTS`.
    async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let png = self.c().screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        assert!(png.len() > 10_000, "a blank page? {} bytes", png.len());
        if let Some(out) = std::env::var_os("DSH_VIEW_SCREENSHOTS") {
            std::fs::write(Path::new(&out).join(name), &png).unwrap();
        }
        let path = dir.join(name);
        std::fs::write(&path, &png).unwrap();
        path
    }

    async fn close(mut self) {
        if let Some(c) = self.client.take() {
            let _ = c.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: chromedriver and the browser it started.
        let _ = Command::new("kill")
            .arg("--")
            .arg(format!("-{}", self.driver.id()))
            .status();
        let _ = self.driver.wait();
    }
}

/// Per step: [call bars in its waterfall, its own calls, their shaded stage segments].
const STEP_COUNTS: &str = "return [...document.querySelectorAll('.step')].map(s => [
    s.querySelectorAll('.waterfall .bar:not(.sub)').length,
    s.querySelectorAll(':scope > .call-wrap > .call').length,
    s.querySelectorAll('.waterfall .bar:not(.sub) .seg').length]);";

async fn open(b: &Browser, viewer: &Viewer) -> Vec<Vec<u64>> {
    b.c().goto(&viewer.url).await.unwrap();
    let counts = b
        .until(STEP_COUNTS, |v| v.as_array().is_some_and(|a| !a.is_empty()))
        .await;
    serde_json::from_value(counts).unwrap()
}

fn tool_calls(log: &Path) -> usize {
    of_type(&events(log), "tool/call").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_shows_the_demo_with_one_bar_per_call_and_results_on_click() {
    let tmpdir = tmp();
    let log = demo_log(tmpdir.path());
    let viewer = Viewer::start(&log);
    let b = Browser::start().await;
    let steps = open(&b, &viewer).await;
    for s in &steps {
        assert_eq!(s[0], s[1], "one bar per call: {steps:?}");
        if s[1] > 0 {
            assert!(s[2] > 0, "dsh's timing shades each bar by stage: {steps:?}");
        }
    }
    let bars: u64 = steps.iter().map(|s| s[0]).sum();
    assert_eq!(bars as usize, tool_calls(&log), "{steps:?}");
    b.screenshot(tmpdir.path(), "view-demo.png").await;

    // A call's row opens its detail: the result, and the edit's diff rendered.
    b.click(".call[data-call-id='call_edit_config']").await;
    let result = b
        .text(".detail[data-call-id='call_edit_config'] .result")
        .await;
    assert!(result.contains("has been updated successfully"), "{result}");
    let added = b
        .text(".detail[data-call-id='call_edit_config'] .diff .add")
        .await;
    assert!(added.contains("debug = false"), "{added}");
    let removed = b
        .text(".detail[data-call-id='call_edit_config'] .diff .del")
        .await;
    assert!(removed.contains("debug = true"), "{removed}");
    // A bar opens its call too; a denial and a code are shown.
    b.click(".bar[data-call-id='call_read_secrets']").await;
    let denied = b
        .text(".detail[data-call-id='call_read_secrets'] .result")
        .await;
    assert!(denied.contains("denied by permission rule"), "{denied}");
    let timeout = b.text(".call[data-call-id='call_slow_build'] .code").await;
    assert!(timeout.contains("TOOL_TIMEOUT"), "{timeout}");
    // Code Mode's sub-calls are nested under their run_code.
    let nested = b
        .js("return [...document.querySelectorAll(\".call[data-call-id='call_run_code'] ~ .subs .call\")].map(e => e.dataset.callId);")
        .await;
    assert_eq!(
        nested,
        json!(["call_run_code:code:1", "call_run_code:code:2"])
    );
    // ... and drawn as thin bars right under the run_code's bar, shaded by stage, within it.
    let subs = b
        .js(
            "const p = document.querySelector(\".bar[data-call-id='call_run_code']\");
             const r = p.getBoundingClientRect();
             return [...p.closest('.waterfall').querySelectorAll('.bar.sub')].map(e => {
               const s = e.getBoundingClientRect();
               return [e.dataset.callId, e.querySelectorAll('.seg').length > 0,
                       s.left >= r.left - 1 && s.right <= r.right + 1, s.top > r.top];
             });",
        )
        .await;
    assert_eq!(
        subs,
        json!([
            ["call_run_code:code:1", true, true, true],
            ["call_run_code:code:2", true, true, true]
        ])
    );
    // A sub-call's bar opens its detail, with its stages timed.
    b.click(".bar[data-call-id='call_run_code:code:2']").await;
    let timing = b
        .text(".detail[data-call-id='call_run_code:code:2'] .timing")
        .await;
    assert!(timing.contains("dispatch"), "{timing}");
    b.js("document.querySelector(\".bar[data-call-id='call_run_code']\").closest('.step').scrollIntoView();")
        .await;
    b.screenshot(tmpdir.path(), "view-code-mode.png").await;
    // Back to the edit, its detail open (the README's second picture).
    b.c()
        .find(Locator::Css(".call[data-call-id='call_edit_config']"))
        .await
        .unwrap();
    b.js("document.querySelector(\".call[data-call-id='call_edit_config']\").scrollIntoView();")
        .await;
    b.screenshot(tmpdir.path(), "view-call.png").await;

    // The failure filter keeps only the steps with a matching call.
    b.js("const s = document.getElementById('filter-code'); s.value = 'TOOL_TIMEOUT'; s.dispatchEvent(new Event('change'));")
        .await;
    let shown = b
        .until(
            "return [...document.querySelectorAll('.step:not(.hidden)')].map(s => s.dataset.step);",
            |v| v.as_array().is_some_and(|a| a.len() == 1),
        )
        .await;
    assert_eq!(shown, json!(["7"]));
    b.close().await;
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/session/tests/fixtures/reference-sessions")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_renders_reference_harness_logs_without_timing() {
    let tmpdir = tmp();
    let b = Browser::start().await;

    // Approvals: the question and its answer are shown with the call they were about.
    let log = fixture("apps-approval-composer.jsonl");
    let viewer = Viewer::start(&log);
    let steps = open(&b, &viewer).await;
    for s in &steps {
        assert_eq!(s[0], s[1], "one bar per call: {steps:?}");
        assert_eq!(s[2], 0, "no timing, no stages: {steps:?}");
    }
    let bars: u64 = steps.iter().map(|s| s[0]).sum();
    assert_eq!(bars as usize, tool_calls(&log));
    let axis = b.text(".waterfall .axis").await;
    assert!(axis.contains("no timing"), "{axis}");
    let asked = "call_00_Oa8HTzXO89hDxPkAtKSn1634";
    b.click(&format!(".call[data-call-id='{asked}']")).await;
    let approval = b
        .text(&format!(".detail[data-call-id='{asked}'] .approval"))
        .await;
    assert!(approval.contains("allowed-once"), "{approval}");
    assert!(approval.contains("escalate sandbox"), "{approval}");
    b.screenshot(tmpdir.path(), "view-reference.png").await;
    drop(viewer);

    // Code Mode: the program's sub-calls under it, each with its result on click.
    let log = fixture("apps-code-mode-round.jsonl");
    let subs = of_type(&events(&log), "tool/code-dispatch").len();
    let viewer = Viewer::start(&log);
    let steps = open(&b, &viewer).await;
    let bars: u64 = steps.iter().map(|s| s[0]).sum();
    assert_eq!(bars as usize, tool_calls(&log));
    let nested = b
        .js("return document.querySelectorAll('.subs .call').length;")
        .await;
    assert_eq!(nested, json!(subs), "every sub-call nested");
    b.click(".subs .call").await;
    let text = b.text(".subs .detail .result").await;
    assert!(!text.is_empty());
    drop(viewer);

    // Hooks: a PostToolUse hook that blocked the output, shown with the call it ran for.
    let viewer = Viewer::start(&fixture("examples-hook-cc-posttool-block.jsonl"));
    open(&b, &viewer).await;
    let blocked = "call_00_VAByyMjsct4c7P6k1ysX9256";
    b.click(&format!(".call[data-call-id='{blocked}']")).await;
    let hooks = b
        .text(&format!(".detail[data-call-id='{blocked}'] .hooks"))
        .await;
    assert!(hooks.contains("PostToolUse"), "{hooks}");
    assert!(hooks.contains("block"), "{hooks}");
    drop(viewer);

    // What a log holds is shown as text, never run as markup.
    let evil = r#"<img src=x onerror=\"document.body.dataset.pwned=1\">"#;
    let text = std::fs::read_to_string(fixture("examples-parallel-tool-calls.jsonl")).unwrap();
    let hostile = tmpdir.path().join("hostile.jsonl");
    std::fs::write(&hostile, text.replace("alpha", evil)).unwrap();
    let viewer = Viewer::start(&hostile);
    open(&b, &viewer).await;
    b.click(".call[data-call-id='call_read_a']").await;
    let shown = b.text(".detail[data-call-id='call_read_a'] .result").await;
    assert!(shown.contains("<img src=x onerror="), "{shown}");
    assert_eq!(
        b.js("return document.body.dataset.pwned || null;").await,
        Value::Null
    );
    assert_eq!(
        b.js("return document.querySelectorAll('img').length;")
            .await,
        json!(0)
    );
    b.close().await;
}

/// The lines of `log` up to and including its `n`-th `step/end` (header included).
fn through_step(lines: &[&str], n: usize) -> usize {
    let mut seen = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.contains("\"type\":\"step/end\"") {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    panic!("the log has fewer than {n} steps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_follows_a_session_whose_log_grows() {
    let tmpdir = tmp();
    let full = std::fs::read_to_string(demo_log(tmpdir.path())).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let (one, two) = (through_step(&lines, 1), through_step(&lines, 2));
    let live = tmpdir.path().join("live.jsonl");
    std::fs::write(&live, lines[..one].join("\n") + "\n").unwrap();
    let viewer = Viewer::start(&live);
    let b = Browser::start().await;
    let steps = open(&b, &viewer).await;
    assert_eq!(steps.len(), 1, "{steps:?}");
    let calls = "return document.querySelectorAll('.call').length;";
    let before = b.js(calls).await.as_u64().unwrap();
    assert_eq!(before, 2, "step 1's two reads");

    // The session goes on: its next step is appended.
    append(&live, &lines[one..two]);
    let after = b.until(calls, |v| v.as_u64() == Some(before + 1)).await;
    assert_eq!(after, json!(before + 1));
    let edit = b.text(".call[data-call-id='call_edit_blind'] .code").await;
    assert!(edit.contains("FS_NOT_OBSERVED"), "{edit}");
    // Pushed by the server's event stream: the page never asked for the events.
    assert_eq!(
        b.js("return document.body.dataset.follow;").await,
        json!("sse")
    );
    assert_eq!(b.js(ASKED_FOR_EVENTS).await, json!(0));

    // Without EventSource the page falls back to asking, and still follows.
    b.js("window.EventSource = undefined; choose(state.id);")
        .await;
    b.until(calls, |v| v.as_u64() == Some(before + 1)).await;
    assert_eq!(
        b.js("return document.body.dataset.follow;").await,
        json!("poll")
    );
    let three = through_step(&lines, 3);
    append(&live, &lines[two..three]);
    let more = b.until(calls, |v| v.as_u64() > Some(before + 1)).await;
    assert!(more.as_u64() > Some(before + 1));
    assert!(b.js(ASKED_FOR_EVENTS).await.as_u64() > Some(0));
    b.close().await;
}

/// How many times the page fetched `api/events` (what it does only when polling).
const ASKED_FOR_EVENTS: &str = "return performance.getEntriesByType('resource').filter(e => e.name.includes('/api/events?')).length;";

/// Appends `lines` to `log`, a line at a time, as a writer would.
fn append(log: &Path, lines: &[&str]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_shows_a_runs_hook_decisions_with_their_calls() {
    let t = tmp();
    let ws = t.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    // A PreToolUse hook that refuses the call whose text is "b" and lets the other one by.
    let hook = r#"if grep -q '"b"'; then echo 'not b' >&2; exit 2; fi"#;
    let settings = t.path().join("settings.json");
    let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": hook}]}]}});
    std::fs::write(&settings, hooks.to_string()).unwrap();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai(
            "two echoes",
            &[
                call("c1", "echo", json!({"text": "a"})),
                call("c2", "echo", json!({"text": "b"})),
            ],
        )],
    );
    let log = t.path().join("log.jsonl");
    let out = run(dsh().args([
        "run",
        s(&sc),
        "--workspace",
        s(&ws),
        "--demo-tools",
        "--settings",
        s(&settings),
        "--session",
        s(&log),
    ]));
    assert_eq!(out.code, 0, "{}", out.both());
    let viewer = Viewer::start(&log);
    let b = Browser::start().await;
    let steps = open(&b, &viewer).await;
    assert_eq!(steps[0][0], 2, "{steps:?}");
    assert!(steps[0][2] > 0, "timed: {steps:?}");
    b.click(".call[data-call-id='c2']").await;
    let hooks = b.text(".detail[data-call-id='c2'] .hooks").await;
    assert!(
        hooks.contains("PreToolUse") && hooks.contains("deny"),
        "{hooks}"
    );
    let result = b.text(".detail[data-call-id='c2'] .result").await;
    assert!(result.contains("not b"), "{result}");
    b.click(".call[data-call-id='c1']").await;
    let hooks = b.text(".detail[data-call-id='c1'] .hooks").await;
    assert!(!hooks.contains("deny"), "{hooks}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_shows_and_follows_sessions_of_a_postgres_store() {
    // (On a thread of its own: it runs a runtime of its own to create the database.)
    let url = std::thread::spawn(super::store_cli::fresh_db)
        .join()
        .unwrap();
    let t = tmp();
    let log = demo_log(t.path());
    let out = dsh_run(&["import", "--store", &url, s(&log), "--id", "demo"]);
    assert_eq!(out.code, 0, "{}", out.both());
    let viewer = Viewer::store(&url, Some("demo"));
    let b = Browser::start().await;
    let steps = open(&b, &viewer).await;
    let bars: u64 = steps.iter().map(|s| s[0]).sum();
    assert_eq!(bars as usize, tool_calls(&log), "{steps:?}");
    b.click(".call[data-call-id='call_edit_config']").await;
    let result = b
        .text(".detail[data-call-id='call_edit_config'] .result")
        .await;
    assert!(result.contains("has been updated successfully"), "{result}");

    // A run writing to the store: the page shows its call, then its result when committed.
    let run = super::store_cli::running_store_session(t.path(), &url, "live-1", "slow", 4000);
    b.js("choose('live-1');").await;
    let status = "const e = document.querySelector(\".call[data-call-id='slow'] .st\"); return e ? e.textContent : null;";
    let pending = b.until(status, Value::is_string).await;
    assert_eq!(pending, json!("…"), "the call takes 4 s");
    assert_eq!(
        b.js("return document.body.dataset.follow;").await,
        json!("sse")
    );
    b.until(status, |v| v == "✓").await;
    assert_eq!(wait(run.child), 0);
    b.close().await;
}

/// The text of the status mark of call `id`'s row (`✓`, `✗`, `…`, `∅`, `?`), or null.
fn status_of(id: &str) -> String {
    format!(
        "const e = document.querySelector(\".call[data-call-id='{id}'] .st\"); return e ? e.textContent : null;"
    )
}

/// The text of the note a stopped session with unanswered calls gets, or null.
const STOPPED_NOTE: &str =
    "const e = document.querySelector('.stopped-note'); return e ? e.textContent : null;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_shows_the_calls_a_stopped_session_left_without_a_result() {
    let tmpdir = tmp();
    let full = std::fs::read_to_string(demo_log(tmpdir.path())).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    // Its writer killed in step 1: the model's message made two reads, only the first was
    // recorded (`tool/call`), and neither was answered.
    let first_call = lines
        .iter()
        .position(|l| l.contains("\"type\":\"tool/call\""))
        .unwrap();
    assert!(lines[first_call].contains("call_read_notes"));
    let stopped = tmpdir.path().join("stopped.jsonl");
    std::fs::write(&stopped, lines[..=first_call].join("\n") + "\n").unwrap();
    let check = dsh_run(&["check", s(&stopped)]);
    assert_eq!(check.code, 1, "{}", check.both());
    assert!(
        check.stdout.contains("call_read_notes") && check.stdout.contains("call_read_app"),
        "{}",
        check.both()
    );

    let viewer = Viewer::start(&stopped);
    let b = Browser::start().await;
    b.c().goto(&viewer.url).await.unwrap();
    // The call never recorded is shown, as such; the recorded one says the session stopped.
    let unrecorded = b.until(&status_of("call_read_app"), Value::is_string).await;
    assert_eq!(unrecorded, json!("?"));
    assert_eq!(b.js(&status_of("call_read_notes")).await, json!("∅"));
    let note = b.until(STOPPED_NOTE, Value::is_string).await;
    let note = note.as_str().unwrap();
    let repair = format!("dsh repair {}", stopped.display());
    assert!(note.contains("Not being written"), "{note}");
    assert!(note.contains("1 call(s) without a result"), "{note}");
    assert!(
        note.contains("1 call(s) the model made that were never recorded"),
        "{note}"
    );
    assert!(note.contains(&format!("`{repair}`")), "{note}");
    b.click(".call[data-call-id='call_read_notes']").await;
    let text = b
        .text(".detail[data-call-id='call_read_notes'] .result")
        .await;
    assert!(
        text.contains("the session stopped before this call was answered"),
        "{text}"
    );
    assert!(text.contains(&repair), "{text}");
    b.click(".call[data-call-id='call_read_app']").await;
    let text = b
        .text(".detail[data-call-id='call_read_app'] .result")
        .await;
    assert!(text.contains("never recorded"), "{text}");
    assert!(text.contains("never ran"), "{text}");

    // `dsh repair` answers both: the page, following the file, shows their results.
    let repaired = dsh_run(&["repair", s(&stopped)]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    b.until(&status_of("call_read_app"), |v| v == "✗").await;
    assert_eq!(b.js(&status_of("call_read_notes")).await, json!("✗"));
    b.until(STOPPED_NOTE, Value::is_null).await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_in_chromium_says_a_stored_session_is_no_longer_written_and_sees_its_repair() {
    let url = std::thread::spawn(super::store_cli::fresh_db)
        .join()
        .unwrap();
    let t = tmp();
    let mut writer = super::store_cli::running_store_session(t.path(), &url, "cut", "slow", 20_000);
    let viewer = Viewer::store(&url, Some("cut"));
    let b = Browser::start().await;
    b.c().goto(&viewer.url).await.unwrap();
    let pending = b.until(&status_of("slow"), Value::is_string).await;
    assert_eq!(pending, json!("…"), "running");
    assert_eq!(b.js(STOPPED_NOTE).await, Value::Null);

    // The writer is killed: the stream ends, and the page says the session is not written.
    writer.child.kill().unwrap();
    writer.child.wait().unwrap();
    b.until(&status_of("slow"), |v| v == "∅").await;
    let badge = b.text(".badge.ended").await;
    assert_eq!(badge, "no longer being written");
    let note = b.until(STOPPED_NOTE, Value::is_string).await;
    let note = note.as_str().unwrap();
    assert!(note.contains("1 call(s) without a result"), "{note}");
    assert!(note.contains("`dsh repair --store postgres://"), "{note}");
    assert!(note.contains(" cut`"), "{note}");
    b.until("return document.body.dataset.follow;", |v| v == "ended")
        .await;

    // A repair after the stream ended is seen.
    let repaired = dsh_run(&["repair", "--store", &url, "cut"]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    b.until(&status_of("slow"), |v| v == "✗").await;
    b.until(STOPPED_NOTE, Value::is_null).await;
    b.click(".call[data-call-id='slow']").await;
    let result = b.text(".detail[data-call-id='slow'] .result").await;
    assert!(!result.is_empty(), "{result}");
    b.close().await;
}
