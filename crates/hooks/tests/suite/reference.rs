//! The reference session `examples-hook-cc-posttool-block` replayed with a real hook: a
//! PostToolUse hook rejects the first `bash` result (exit 2), the model retries, the second
//! passes. Our `hook/*` events carry the reference's keys, in its order, with the same values
//! (timings aside), and the log stays valid.

use std::path::PathBuf;

use dsh_core::Signal;
use dsh_session::check_events;
use serde_json::{Map, Value, json};

use super::support::*;

fn reference() -> Vec<(String, Value)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../session/tests/fixtures/reference-sessions/examples-hook-cc-posttool-block.jsonl");
    let text = std::fs::read_to_string(&path).expect("reference fixture");
    text.lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).expect("line"))
        .map(|v| {
            (
                v["type"].as_str().unwrap_or_default().to_owned(),
                v["data"].clone(),
            )
        })
        .collect()
}

fn tool_and_hook_events(events: &[(String, Value)]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|(t, _)| t.starts_with("hook/") || t == "tool/call" || t == "tool/result")
        .cloned()
        .collect()
}

/// The reference's keys, in its order, are a prefix-ordered subset of ours.
fn keys_in_order(ours: &Map<String, Value>, theirs: &Map<String, Value>) {
    let our_keys: Vec<&String> = ours.keys().filter(|k| theirs.contains_key(*k)).collect();
    let their_keys: Vec<&String> = theirs.keys().collect();
    assert_eq!(our_keys, their_keys, "ours: {ours:?}");
}

#[tokio::test]
async fn log_hook_events_match_the_reference_shapes() {
    let ws = Ws::new();
    let marker = ws.root().join("rejected-once");
    let cmd = ws.script(
        "reject_once.sh",
        &format!(
            "#!/usr/bin/env bash\ncat >/dev/null\nif [ ! -e '{m}' ]; then touch '{m}'; echo 'tool output rejected by policy: retry once' >&2; exit 2; fi\n",
            m = marker.display()
        ),
    );
    let p = Pipe::new(&ws.hooks(one_hook("PostToolUse", "bash", &cmd))).await;
    let args = json!({"command": "echo HELLO", "description": "Echo HELLO to stdout"});
    let mut driver = p.driver();
    driver
        .run_turn(
            vec![
                calls(&[("call_00_VAByyMjsct4c7P6k1ysX9256", "bash", args.clone())]),
                calls(&[("call_00_tDV4j1p5eAeHTtQhXOfn6856", "bash", args)]),
                reply("HELLO"),
            ],
            Signal::never(),
        )
        .await
        .expect("turn");

    let theirs = tool_and_hook_events(&reference());
    let ours = tool_and_hook_events(&all_events(&p.session));
    let kinds = |v: &[(String, Value)]| v.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(kinds(&ours), kinds(&theirs));

    for ((kind, o), (_, t)) in ours.iter().zip(&theirs) {
        let (Some(o), Some(t)) = (o.as_object(), t.as_object()) else {
            panic!("event data must be objects");
        };
        if kind.starts_with("hook/") {
            keys_in_order(o, t);
            for (k, v) in t {
                if k == "turn" || k == "durationMs" {
                    assert!(o[k].is_number(), "{k}");
                } else {
                    assert_eq!(&o[k], v, "{kind}.{k}");
                }
            }
        }
    }
    // What the model saw: the rejection, then the real output.
    let results = p.events("tool/result");
    let seen = |i: usize| results[i]["message"]["content"][0]["content"][0]["text"].clone();
    assert_eq!(seen(0), "tool output rejected by policy: retry once");
    assert_eq!(seen(1), "bash ran: echo HELLO");
    // The log with hook events is a valid log.
    let events = p.session.events();
    let problems = check_events(events.pairs());
    assert!(problems.is_empty(), "{problems:?}");
}
