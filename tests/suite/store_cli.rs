//! Sessions in PostgreSQL through the real binary (`--store`): two processes on one database,
//! the first killed mid-call, the second resuming (I4); a second writer refused; import/export
//! byte for byte; `sessions`, `transcript`, `check` and `repair` on a store. A real server
//! (a throwaway cluster) is started once for these tests; they fail without one.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_test_support::postgres::Cluster;
use serde_json::json;

use super::support::*;

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The cluster these tests share (started on first use).
pub(super) fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(Cluster::start)
}

/// A URL of a fresh database of the shared cluster.
pub(super) fn fresh_db() -> String {
    let cluster = cluster();
    let name = format!(
        "cli{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(&cluster.url(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\n{}", cluster.server_log()));
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
    });
    cluster.url_for(&name)
}

/// `dsh run` of a long `sleep` call on session `id`, killed with SIGKILL once its call is
/// committed (printed with `--json` only once durable).
/// The arguments of `dsh run SCRIPT` in workspace `ws`, on session `id` of the store at
/// `url`, with the demo tools.
pub(super) fn store_run_args<'a>(
    sc: &'a std::path::Path,
    ws: &'a std::path::Path,
    url: &'a str,
    id: &'a str,
) -> Vec<&'a str> {
    vec![
        "run",
        s(sc),
        "--workspace",
        s(ws),
        "--store",
        url,
        "--session",
        id,
        "--demo-tools",
    ]
}

/// A script whose model makes one `echo` call, then answers nothing more.
pub fn echo_script(dir: &std::path::Path) -> std::path::PathBuf {
    script(
        dir,
        "s.jsonl",
        &[openai("", &[call("e1", "echo", json!({"text": "hi"}))])],
    )
}

/// Stored session `id`, written by a run of [`echo_script`] that ended cleanly.
pub fn stored_echo_session(url: &str, dir: &std::path::Path, id: &str) {
    let ran = dsh_run(&store_run_args(&echo_script(dir), dir, url, id));
    assert_eq!(ran.code, 0, "{}", ran.both());
}

fn killed_mid_call(url: &str, ws: &std::path::Path, id: &str) {
    let sc = script(
        ws,
        "long.jsonl",
        &[anthropic(
            "",
            &[call("long", "sleep", json!({"ms": 20_000}))],
        )],
    );
    let mut live = Live::spawn(dsh().args(store_run_args(&sc, ws, url, id)).arg("--json"));
    live.until(|l| l.contains("\"tool/call\""));
    live.child.kill().unwrap();
    live.child.wait().unwrap();
}

/// Starts `dsh run --store url --session id` on a script whose one call (`call_id`) sleeps
/// `ms`, and returns it once its `tool/call` is printed (committed), the call still running.
pub fn running_store_session(
    dir: &std::path::Path,
    url: &str,
    id: &str,
    call_id: &str,
    ms: u64,
) -> Live {
    let sc = script(
        dir,
        &format!("{id}.jsonl"),
        &[openai("", &[call(call_id, "sleep", json!({ "ms": ms }))])],
    );
    let mut run = Live::spawn(dsh().args(store_run_args(&sc, dir, url, id)).arg("--json"));
    run.until(|l| l.contains("\"tool/call\""));
    run
}

#[test]
fn i4_a_session_killed_in_one_process_is_resumed_by_another_and_checks_clean() {
    let url = fresh_db();
    let t = tmp();
    killed_mid_call(&url, t.path(), "fleet-1");

    let before = dsh_run(&["check", "--store", &url, "fleet-1"]);
    assert_eq!(before.code, 1, "{}", before.both());
    assert!(
        before.stdout.contains("tool/call \"long\""),
        "{}",
        before.both()
    );
    // A stored session's lines are named by seq (it has no line numbers to look up), the same
    // seq the line holds in the export.
    let exported = dsh_run(&["export", "--store", &url, "fleet-1"]).stdout;
    let problem = before
        .stdout
        .lines()
        .find(|l| l.contains("tool/call \"long\""))
        .unwrap();
    let seq: u64 = problem
        .strip_prefix("fleet-1, seq ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("named by seq: {problem}"));
    let log = dsh::session::read_log(exported.as_bytes()).unwrap();
    let (_, logged) = log.events.iter().find(|(s, _)| *s == seq).unwrap();
    assert_eq!(
        logged.as_tool_call().map(|c| c.call_id),
        Some("long"),
        "{problem}"
    );
    let transcript = dsh_run(&["transcript", "--store", &url, "fleet-1"]);
    assert!(
        transcript.stderr.contains(&format!("first: seq {seq}: ")),
        "{}",
        transcript.both()
    );

    // Another process resumes the session: repaired on takeover, then its own turn.
    let next = script(
        t.path(),
        "next.jsonl",
        &[anthropic(
            "",
            &[call("e1", "echo", json!({"text": "after"}))],
        )],
    );
    let resumed = run(dsh()
        .args(["run", s(&next), "--workspace", s(t.path()), "--demo-tools"])
        .args(["--session", "fleet-1"])
        .env("DSH_STORE", &url));
    assert_eq!(resumed.code, 0, "{}", resumed.both());
    assert!(
        resumed.stderr.contains("closed call long"),
        "{}",
        resumed.both()
    );

    let after = dsh_run(&["check", "--store", &url, "fleet-1"]);
    assert_eq!(after.code, 0, "{}", after.both());
    assert_eq!(after.stdout.trim(), "fleet-1: ok");

    // The exported log is a file `dsh check` passes, with the interrupted call answered.
    let export = dsh_run(&["export", "--store", &url, "fleet-1"]);
    assert_eq!(export.code, 0, "{}", export.both());
    let log = t.path().join("fleet-1.jsonl");
    std::fs::write(&log, &export.stdout).unwrap();
    assert_checks_clean(&log);
    let ev = events(&log);
    assert_paired(&ev);
    assert_eq!(result_of(&ev, "long").code.as_deref(), Some("INTERRUPTED"));
    assert_eq!(result_of(&ev, "e1").code, None);
}

#[test]
fn a_second_process_writing_a_leased_session_is_refused_in_one_sentence() {
    let url = fresh_db();
    let t = tmp();
    let sc = script(
        t.path(),
        "long.jsonl",
        &[anthropic(
            "",
            &[call("long", "sleep", json!({"ms": 20_000}))],
        )],
    );
    let mut first = Live::spawn(
        dsh()
            .args(store_run_args(&sc, t.path(), &url, "busy"))
            .arg("--json"),
    );
    first.until(|l| l.contains("\"tool/call\""));
    let second = dsh_run(&store_run_args(&sc, t.path(), &url, "busy"));
    // Its transcript and its export say it is being written; neither advises a repair, which
    // the lease would refuse.
    let shown = dsh_run(&["transcript", "--store", &url, "busy"]);
    let exported = dsh_run(&["export", "--store", &url, "busy"]);
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert_eq!(second.code, 1, "{}", second.both());
    let err = second.stderr.trim();
    assert!(
        err.contains("session busy is being written by another process"),
        "{}",
        second.both()
    );
    assert_eq!(err.lines().count(), 1, "{}", second.both());
    for (what, out) in [("transcript", &shown), ("export", &exported)] {
        assert_eq!(out.code, 0, "{what}: {}", out.both());
        assert!(
            out.stderr
                .contains("still being written (a running dsh holds its lease)")
                && !out.stderr.contains("dsh repair"),
            "{what}: {}",
            out.both()
        );
    }
    assert!(
        exported.stdout.contains("\"tool/call\""),
        "{}",
        exported.both()
    );
    // When the lease runs out, as a UTC time (RFC 3339) and how long from now.
    let until = err
        .split("its lease runs until ")
        .nth(1)
        .unwrap_or_else(|| panic!("no expiry: {err}"));
    let (stamp, rest) = until.split_at(20);
    let shape: String = stamp
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    assert_eq!(shape, "9999-99-99T99:99:99Z", "{err}");
    assert!(
        rest.starts_with(", ") && rest.contains(" s from now:"),
        "{err}"
    );
    let listed = dsh_run(&["sessions", "--store", &url, "--workspace", s(t.path())]);
    assert_eq!(listed.code, 0, "{}", listed.both());
    assert!(listed.stdout.starts_with("busy  "), "{}", listed.both());
}

#[test]
fn a_reference_harness_log_imported_and_exported_by_the_cli_is_byte_identical() {
    let url = fresh_db();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/session/tests/fixtures/reference-sessions/examples-fs-edit.jsonl");
    let original = std::fs::read(&fixture).unwrap();
    let imported = dsh_run(&["import", "--store", &url, s(&fixture), "--id", "ref"]);
    assert_eq!(imported.code, 0, "{}", imported.both());
    assert!(imported.stdout.starts_with("ref  "), "{}", imported.both());
    let out = dsh()
        .args(["export", "--store", &url, "ref"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stdout == original,
        "the export differs from the imported file"
    );
    let transcript = dsh_run(&["transcript", "--store", &url, "ref"]);
    assert_eq!(transcript.code, 0, "{}", transcript.both());
    let file_transcript = dsh_run(&["transcript", s(&fixture)]);
    assert_eq!(transcript.stdout, file_transcript.stdout);
    let again = dsh_run(&["import", "--store", &url, s(&fixture), "--id", "ref"]);
    assert_eq!(again.code, 2, "{}", again.both());
    assert!(
        again.stderr.contains("session ref already exists"),
        "{}",
        again.both()
    );
    let missing = dsh_run(&["export", "--store", &url, "nope"]);
    assert_eq!(missing.code, 2, "{}", missing.both());
    let no_store = run(dsh().args(["export", "ref"]).env_remove("DSH_STORE"));
    assert_eq!(no_store.code, 2, "{}", no_store.both());
    assert!(
        no_store.stderr.contains("needs a store"),
        "{}",
        no_store.both()
    );
}

#[test]
fn repair_on_a_store_answers_the_calls_of_a_killed_session() {
    let url = fresh_db();
    let t = tmp();
    killed_mid_call(&url, t.path(), "r1");
    let repaired = dsh_run(&["repair", "--store", &url, "r1"]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    assert!(
        repaired.stdout.starts_with("r1: repaired"),
        "{}",
        repaired.both()
    );
    assert!(
        repaired.stdout.contains("closed call long"),
        "{}",
        repaired.both()
    );
    let check = dsh_run(&["check", "--store", &url, "r1"]);
    assert_eq!(check.code, 0, "{}", check.both());
    let again = dsh_run(&["repair", "--store", &url, "r1"]);
    assert_eq!(
        again.stdout.trim(),
        "r1: nothing to repair",
        "{}",
        again.both()
    );
}

#[test]
fn dsh_agent_keeps_its_session_in_the_store_and_resume_continues_it() {
    use super::agent_policy::{agent, history, mock, push_reads_then_answer, workspace};
    let url = fresh_db();
    let m = mock();
    let w = workspace();
    push_reads_then_answer(&m.mock, &["notes.txt"], "The notes say hello.");
    let first = run(agent(
        &w,
        Some(&m.mock.openai_base_url()),
        "What do the notes say?",
        &["--store", &url, "--session", "chat-1"],
    )
    .env_remove("DSH_STORE"));
    assert_eq!(first.code, 0, "{}", first.both());
    assert!(
        first.stdout.contains("The notes say hello."),
        "{}",
        first.both()
    );
    assert!(!w.state.join("dsh").exists(), "no file log with --store");
    push_reads_then_answer(&m.mock, &[], "Still hello.");
    let second = run(agent(
        &w,
        Some(&m.mock.openai_base_url()),
        "And now?",
        &["--store", &url, "--resume", "chat-1"],
    )
    .env_remove("DSH_STORE"));
    assert_eq!(second.code, 0, "{}", second.both());
    // The second request carried the first turn's history, read from the store.
    let bodies = m.mock.requests();
    let last = history(&bodies.last().unwrap().body);
    assert!(
        last.iter().any(|m| m.contains("What do the notes say?")),
        "{last:?}"
    );
    let check = dsh_run(&["check", "--store", &url, "chat-1"]);
    assert_eq!(check.code, 0, "{}", check.both());
    // A mistyped id is refused, as with files: no new session starts in its place.
    let asked = m.mock.requests().len();
    let typo = run(agent(
        &w,
        Some(&m.mock.openai_base_url()),
        "And now?",
        &["--store", &url, "--resume", "chat-2"],
    )
    .env_remove("DSH_STORE"));
    assert_eq!(typo.code, 2, "{}", typo.both());
    assert!(
        typo.stderr.contains("--resume chat-2: no such session"),
        "{}",
        typo.both()
    );
    assert_eq!(m.mock.requests().len(), asked, "the model was not asked");
    let listed = dsh_run(&["sessions", "--store", &url, "--all"]);
    assert!(!listed.stdout.contains("chat-2"), "{}", listed.both());
}

#[test]
fn dsh_tail_prints_a_running_sessions_lines_as_they_commit_and_ends_with_the_writer() {
    let url = fresh_db();
    let t = tmp();
    let writer = running_store_session(t.path(), &url, "live", "nap", 1_500);
    let mut tail = Live::spawn(dsh().args(["tail", "--store", &url, "live"]));
    tail.until(|l| l.contains("\"tool/call\""));
    // The result is committed while the tail is running: it arrives through LISTEN/NOTIFY.
    tail.until(|l| l.contains("\"tool/result\""));
    tail.until(|l| l.contains("\"turn/end\""));
    assert_eq!(wait(writer.child), 0);
    assert_eq!(wait(tail.child), 0, "the tail ends once the writer is gone");
}

#[test]
fn a_run_refused_before_it_starts_leaves_no_session_in_the_store() {
    let url = fresh_db();
    let t = tmp();
    let sc = script(t.path(), "s.jsonl", &[anthropic("done", &[])]);
    let bad = t.path().join("bad.toml");
    std::fs::write(&bad, "[permissions]\ndeny = [\"raed(secrets.env)\"]\n").unwrap();
    let run = |id: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            s(&sc),
            "--workspace",
            s(t.path()),
            "--store",
            &url,
            "--session",
            id,
        ];
        args.extend_from_slice(extra);
        dsh_run(&args)
    };
    let refused = run("refused", &["--policy", s(&bad)]);
    assert_eq!(refused.code, 2, "{}", refused.both());
    assert!(
        refused.stderr.contains("raed(secrets.env)"),
        "{}",
        refused.both()
    );
    let listed = dsh_run(&["sessions", "--store", &url, "--workspace", s(t.path())]);
    assert_eq!(listed.code, 0, "{}", listed.both());
    assert_eq!(
        listed.stdout,
        "",
        "the refused run left no session: {}",
        listed.both()
    );
    // A session that already holds events keeps them when a later run of it is refused.
    let ok = run("kept", &[]);
    assert_eq!(ok.code, 0, "{}", ok.both());
    let again = run("kept", &["--policy", s(&bad)]);
    assert_eq!(again.code, 2, "{}", again.both());
    let listed = dsh_run(&["sessions", "--store", &url, "--workspace", s(t.path())]);
    assert!(listed.stdout.starts_with("kept  "), "{}", listed.both());
    let check = dsh_run(&["check", "--store", &url, "kept"]);
    assert_eq!(check.code, 0, "{}", check.both());
}

/// Runs `statements` (one or several, `;`-separated) on the database at `url`: the rows
/// they touched, or the first error.
pub(super) fn try_sql(url: &str, statements: &str) -> Result<u64, tokio_postgres::Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        let done = client.simple_query(statements).await?;
        Ok(done
            .iter()
            .map(|m| match m {
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => *n,
                _ => 0,
            })
            .sum())
    })
}

/// [`try_sql`], which must succeed.
pub(super) fn sql(url: &str, statements: &str) -> u64 {
    try_sql(url, statements).unwrap_or_else(|e| {
        let said = e.as_db_error().map(|d| d.message().to_owned());
        panic!("{statements}: {e}: {said:?}")
    })
}

#[test]
fn a_result_the_store_refused_is_not_shown_as_a_success() {
    // The lease is taken from the writer while its call runs: the call's result cannot be
    // logged, so the terminal must not tick it as done (the log, which the model's history is
    // rebuilt from, never holds it).
    let url = fresh_db();
    let t = tmp();
    let sc = script(
        t.path(),
        "s.jsonl",
        &[openai("", &[call("nap", "sleep", json!({ "ms": 3_000 }))])],
    );
    let args: Vec<String> = store_run_args(&sc, t.path(), &url, "lost")
        .into_iter()
        .map(str::to_owned)
        .collect();
    let run =
        std::thread::spawn(move || dsh_run(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let committed =
        "SELECT 1 FROM dsh_events WHERE session_id = 'lost' AND line LIKE '%\"tool/call\"%'";
    let start = std::time::Instant::now();
    // (The store's tables appear with its first connection.)
    while try_sql(&url, committed).unwrap_or(0) == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the call was never committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let taken = sql(
        &url,
        "UPDATE dsh_sessions SET lease_token = lease_token + 1, lease_owner = 'elsewhere:1' WHERE id = 'lost'",
    );
    assert_eq!(taken, 1);
    let out = run.join().unwrap();
    assert_eq!(out.code, 1, "{}", out.both());
    // The reason is said once, by the run's failure (it was said three times: by the store's
    // writer, by the session's writer and by the run).
    assert_eq!(
        out.stderr.matches("was taken over by elsewhere:1").count(),
        1,
        "{}",
        out.both()
    );
    assert!(
        !out.both().contains('✓'),
        "a result the log refused was shown as a success:\n{}",
        out.both()
    );
    assert!(
        out.both().contains("✗ sleep") && out.both().contains("not recorded"),
        "{}",
        out.both()
    );
}

#[test]
fn i4_dsh_tail_of_a_session_whose_writer_was_killed_says_so_and_exits_1() {
    let url = fresh_db();
    let t = tmp();
    killed_mid_call(&url, t.path(), "dead");
    let tail = dsh_run(&["tail", "--store", &url, "dead"]);
    assert_eq!(tail.code, 1, "{}", tail.both());
    assert!(
        tail.stdout.contains("\"tool/call\""),
        "every line is printed: {}",
        tail.both()
    );
    assert!(
        tail.stderr.contains("session dead: its writer ")
            && tail
                .stderr
                .contains("stopped without closing the session; opening it again repairs it")
            && tail.stderr.contains("`dsh check --store URL dead`"),
        "{}",
        tail.both()
    );
    // Repaired, it tails cleanly.
    let repaired = dsh_run(&["repair", "--store", &url, "dead"]);
    assert_eq!(repaired.code, 0, "{}", repaired.both());
    let again = dsh_run(&["tail", "--store", &url, "dead"]);
    assert_eq!(again.code, 0, "{}", again.both());
}

#[test]
fn l4_dsh_tail_names_a_damaged_row_by_seq_prints_every_row_and_exits_1() {
    let url = fresh_db();
    let t = tmp();
    stored_echo_session(&url, t.path(), "hurt");
    let clean = dsh_run(&["tail", "--store", &url, "hurt"]);
    assert_eq!(clean.code, 0, "{}", clean.both());
    assert_eq!(clean.stderr, "", "{}", clean.both());
    let rows = clean.stdout.lines().count();
    assert_eq!(
        sql(
            &url,
            "UPDATE dsh_events SET line = 'not an event' WHERE session_id = 'hurt' AND seq = 2"
        ),
        1
    );
    let tail = dsh_run(&["tail", "--store", &url, "hurt"]);
    assert_eq!(tail.code, 1, "{}", tail.both());
    assert_eq!(tail.stdout.lines().count(), rows, "{}", tail.both());
    assert!(
        tail.stderr.starts_with("dsh: session hurt, seq 2: "),
        "{}",
        tail.both()
    );
    assert_eq!(tail.stderr.lines().count(), 1, "{}", tail.both());
}

#[test]
fn l4_dsh_tail_ends_with_what_dsh_check_finds_in_the_whole_session() {
    let url = fresh_db();
    let t = tmp();
    stored_echo_session(&url, t.path(), "cut");
    // The last row lost: every row left reads well, the session does not.
    sql(
        &url,
        "DELETE FROM dsh_events WHERE session_id = 'cut'
           AND seq = (SELECT max(seq) FROM dsh_events WHERE session_id = 'cut')",
    );
    let tail = dsh_run(&["tail", "--store", &url, "cut"]);
    assert_eq!(tail.code, 1, "{}", tail.both());
    assert!(
        tail.stderr.starts_with("dsh: session cut, seq ")
            && tail
                .stderr
                .contains("the session's next seq is recorded as"),
        "{}",
        tail.both()
    );
    // An imported log whose call was never answered: as `dsh check` says, with the way out.
    let exported = dsh_run(&["export", "--store", &url, "cut"]);
    let open: String = exported
        .stdout
        .lines()
        .take_while(|l| !l.contains("\"tool/result\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let file = t.path().join("open.jsonl");
    std::fs::write(&file, open).unwrap();
    let imported = dsh_run(&["import", "--store", &url, s(&file), "--id", "open"]);
    assert_eq!(imported.code, 0, "{}", imported.both());
    let tail = dsh_run(&["tail", "--store", &url, "open"]);
    assert_eq!(tail.code, 1, "{}", tail.both());
    assert!(
        tail.stderr.contains("has no tool/result")
            && tail
                .stderr
                .contains("`dsh repair --store URL open` answers the calls left unanswered"),
        "{}",
        tail.both()
    );
}
