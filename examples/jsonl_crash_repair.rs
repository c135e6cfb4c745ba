//! A session in the durable JSON Lines store, crashed mid-step and repaired: the call that was
//! recorded but never answered gets an `INTERRUPTED` result, the torn last line is cut, and the
//! log checks clean again.
//!
//! Run: `cargo run --example jsonl_crash_repair`

use std::io::Write;

use dsh::core::Json;
use dsh::serde_json::json;
use dsh::session::{Event, OpenOptions, Session};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("session.jsonl");

    // A process that records a call (durably: `append` returns once synced) and dies before
    // its result: the turn, the step and the call stay open.
    {
        let (session, _) = Session::open_jsonl(&path, OpenOptions::new().id("s1")).await?;
        let message = Json::new(json!({"role": "assistant", "content": [
            {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{\"text\":\"hi\"}"}
        ]}))?;
        session.append(Event::turn_start(1)).await?;
        session.append(Event::step_start(1, 1)).await?;
        session
            .append(Event::assistant_message(1, 1, message))
            .await?;
        session
            .append(Event::tool_call(1, 1, "c1", "echo", "{\"text\":\"hi\"}"))
            .await?;
        session.close().await?;
    }
    // ... and half a line that a crash cut short.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)?
        .write_all(b"{\"type\":\"tool/res")?;

    let problems = dsh::session::check_file(&path)?;
    println!("before repair: {} problem(s)", problems.len());
    for p in &problems {
        println!("  {p}");
    }
    assert!(!problems.is_empty());

    // Opening the log again repairs it (or call `dsh::session::repair(&path)` on its own).
    let (session, report) = Session::open_jsonl(&path, OpenOptions::new()).await?;
    println!(
        "repair: torn tail cut: {}, interrupted calls: {:?}, closed turn: {:?}",
        report.torn_tail.is_some(),
        report
            .interrupted_calls
            .iter()
            .map(|c| &c.call_id)
            .collect::<Vec<_>>(),
        report.closed_turn,
    );
    assert!(report.torn_tail.is_some());
    assert_eq!(report.interrupted_calls.len(), 1);
    session.close().await?;
    assert!(dsh::session::check_file(&path)?.is_empty());

    // The model's history now answers c1 with an "interrupted" error.
    let history = dsh::session::derive_messages(&session.events());
    println!(
        "{}",
        dsh::serde_json::to_string_pretty(
            history.last().map(|m| m.value()).unwrap_or(&json!(null))
        )?
    );
    Ok(())
}

#[test]
fn example_runs() -> Result<(), Box<dyn std::error::Error>> {
    main()
}
