//! Kill trials in the suite: a few runs of the logic behind `cargo xtask kill-trials` (the same
//! file, included by path) on a shorter session, and proof that its checks catch what they are
//! for: a half-written file, a file state the log does not allow, a lost or altered event.

#[allow(dead_code)]
#[path = "../../xtask/src/kill_trials/mod.rs"]
mod kill_trials;

use std::path::{Path, PathBuf};

use kill_trials::run::{Outcome, Session};
use kill_trials::{Config, RunStats, build_session, check_run, prepare_dir, run_session};

use super::support::tmp;

fn dsh_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dsh"))
}

#[test]
fn adv_i4_l3_five_kill_trials_leave_clean_logs_with_every_printed_event_and_whole_files() {
    let t = tmp();
    let seed = kill_trials::clock_seed();
    let cfg = Config {
        dsh: dsh_bin(),
        runs: 5,
        steps: 10,
        seed,
        base: t.path().to_path_buf(),
        store: None,
    };
    let report = kill_trials::run_trials(&cfg, |_| {}).unwrap();
    assert_eq!(report.runs, 5);
    assert!(
        report.failures.is_empty(),
        "seed {seed}: {}",
        report.summary()
    );
    assert_eq!(report.files_checked, 5 * 4);
}

fn unkilled(dir: &Path) -> (Session, Outcome) {
    let session = build_session(10);
    prepare_dir(dir, &session).unwrap();
    let outcome = run_session(&dsh_bin(), dir, None).unwrap();
    assert!(!outcome.killed);
    (session, outcome)
}

fn check(dir: &Path, session: &Session, outcome: &Outcome) -> Vec<String> {
    check_run(&dsh_bin(), dir, session, outcome, &mut RunStats::default())
}

#[test]
fn adv_kill_trial_checks_catch_half_written_files_and_states_the_log_forbids() {
    let t = tmp();
    let (session, outcome) = unkilled(t.path());
    assert_eq!(check(t.path(), &session, &outcome), Vec::<String>::new());
    let file = t.path().join("ws").join("a.txt");
    let whole = std::fs::read(&file).unwrap();
    // Half of the bytes: no state of the script.
    std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();
    let reasons = check(t.path(), &session, &outcome);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("a.txt holds none of the script's states")),
        "{reasons:?}"
    );
    // A whole but older state: the log says later writes succeeded.
    std::fs::remove_file(&file).unwrap();
    let reasons = check(t.path(), &session, &outcome);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("a.txt holds a whole state, but not one the log allows")),
        "{reasons:?}"
    );
}

#[test]
fn adv_kill_trial_checks_catch_a_lost_or_altered_printed_event() {
    let t = tmp();
    let (session, outcome) = unkilled(t.path());
    let log = t.path().join("log.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The last acknowledged event is gone (repair then closes nothing: the turn is open).
    std::fs::write(&log, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    let reasons = check(t.path(), &session, &outcome);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("is not in the log") || r.contains("differs from the log")),
        "{reasons:?}"
    );
    // An event altered after it was printed.
    let altered = text.replacen("\"step 0\"", "\"step X\"", 1);
    assert_ne!(altered, text);
    std::fs::write(&log, altered).unwrap();
    let reasons = check(t.path(), &session, &outcome);
    assert!(
        reasons.iter().any(|r| r.contains("differs from the log")),
        "{reasons:?}"
    );
}

#[test]
fn adv_i4_kill_trial_checks_catch_an_unanswered_model_call_and_a_history_an_api_refuses() {
    let t = tmp();
    let (_session, _outcome) = unkilled(t.path());
    let bytes = std::fs::read(t.path().join("log.jsonl")).unwrap();
    let log = dsh::session::read_log(&bytes).unwrap();
    let messages = dsh::session::derive_messages_from(log.events.iter().map(|(s, e)| (*s, e)));
    assert_eq!(
        kill_trials::check::model_visible_problems(&messages),
        Vec::<String>::new()
    );
    // The wide step's message holds 30 calls.
    let wide = messages
        .iter()
        .map(|m| {
            m.value()["content"]
                .as_array()
                .map_or(0, |b| b.iter().filter(|b| b["type"] == "tool-call").count())
        })
        .max();
    assert_eq!(wide, Some(kill_trials::run::WIDE_STEP));
    // Drop one result from the history: the call is unanswered and both APIs would refuse.
    let mut dropped = 0;
    let cut: Vec<dsh::core::Json> = messages
        .iter()
        .filter(|m| {
            let is_result = m.value()["content"][0]["type"] == "tool-result";
            let drop = is_result && dropped == 0;
            dropped += usize::from(drop);
            !drop
        })
        .cloned()
        .collect();
    let reasons = kill_trials::check::model_visible_problems(&cut);
    assert!(
        reasons.iter().any(|r| r.contains("has 0 results")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("OpenAI would refuse")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("Anthropic would refuse")),
        "{reasons:?}"
    );
}

/// The same trials with each session in PostgreSQL (`--store`): killed at a random instant,
/// repaired by another process's takeover, every printed event in the export at its seq.
#[test]
fn adv_i4_l3_kill_trials_with_sessions_in_postgres_leave_clean_sessions() {
    let cluster = dsh_test_support::postgres::Cluster::start();
    let t = tmp();
    let seed = kill_trials::clock_seed();
    let cfg = Config {
        dsh: dsh_bin(),
        runs: 5,
        steps: 10,
        seed,
        base: t.path().to_path_buf(),
        store: Some(cluster.url()),
    };
    let report = kill_trials::run_trials(&cfg, |_| {}).unwrap();
    assert_eq!(report.runs, 5);
    assert!(
        report.failures.is_empty(),
        "seed {seed}: {}",
        report.summary()
    );
    assert_eq!(report.files_checked, 5 * 4);
}
