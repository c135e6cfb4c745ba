//! OpenTelemetry: a `dsh run` with `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its spans to a real
//! OTLP/HTTP receiver, decoded with the official protobuf definitions (PyPI
//! `opentelemetry-proto`, installed by `.ci/run`; these tests fail, naming it, without it).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::support::*;

/// The receiver, killed when dropped; its spans are lines of `out`.
struct Receiver {
    child: Child,
    port: u16,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn receiver(out: &Path) -> Receiver {
    let probe = Command::new("python3")
        .args([
            "-c",
            "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        probe.status.success(),
        "PyPI `opentelemetry-proto` is missing: `pip install opentelemetry-proto==1.45.2` \
         (.ci/run installs it): {}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel/receiver.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the receiver starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the receiver prints its port");
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a port: {line:?}"));
    Receiver { child, port }
}

fn spans(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a span line"))
        .collect()
}

#[test]
fn a_run_exports_turn_step_and_one_execute_tool_span_per_call_with_genai_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spans.jsonl");
    let receiver = receiver(&out);
    let script = dir.path().join("s.jsonl");
    std::fs::write(
        &script,
        concat!(
            r#"{"role":"assistant","content":"two calls","tool_calls":["#,
            r#"{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}},"#,
            r#"{"id":"c2","type":"function","function":{"name":"fail","arguments":"{\"message\":\"no\"}"}},"#,
            r#"{"id":"c3","type":"function","function":{"name":"echo","arguments":"{}"}}]}"#,
            "\n",
            r#"{"role":"assistant","content":"done"}"#,
            "\n"
        ),
    )
    .unwrap();
    let run = run(dsh()
        .args(["run", s(&script), "--demo-tools", "--session"])
        .arg(dir.path().join("log.jsonl"))
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", receiver.port),
        ));
    assert_eq!(run.code, 0, "{}", run.both());
    // The program flushes before it exits: everything is there now.
    let spans = spans(&out);
    let named =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let turn = named("turn");
    let step = named("step");
    assert_eq!((turn.len(), step.len()), (1, 1), "{spans:#?}");
    assert_eq!(step[0]["parent_span_id"], turn[0]["span_id"]);
    assert_eq!(turn[0]["resource"]["service.name"], "dsh");
    let trace = &turn[0]["trace_id"];
    assert!(spans.iter().all(|s| &s["trace_id"] == trace), "one trace");
    let by_id: HashMap<&str, &Value> = spans
        .iter()
        .filter_map(|s| Some((s["span_id"].as_str()?, s)))
        .collect();
    for (call, tool, error) in [
        ("c1", "echo", None),
        ("c2", "fail", Some("_OTHER")),
        ("c3", "echo", Some("INVALID_ARGS")),
    ] {
        let calls: Vec<&Value> = named(&format!("execute_tool {tool}"))
            .into_iter()
            .filter(|s| s["attributes"]["gen_ai.tool.call.id"] == call)
            .collect();
        assert_eq!(
            calls.len(),
            1,
            "one execute_tool span for {call}: {spans:#?}"
        );
        let span = calls[0];
        let attrs = &span["attributes"];
        assert_eq!(attrs["gen_ai.operation.name"], "execute_tool");
        assert_eq!(attrs["gen_ai.tool.name"], tool);
        assert_eq!(attrs["gen_ai.tool.type"], "function");
        assert_eq!(span["parent_span_id"], step[0]["span_id"]);
        if let Some(error) = error {
            assert_eq!(span["status"], 2, "error status: {span}");
            assert_eq!(attrs["error.type"], error, "{span}");
        } else {
            assert_eq!(span["status"], 0, "{span}");
            assert!(attrs.get("error.type").is_none(), "{span}");
        }
        // Its stages are inside it.
        let own = span["span_id"].as_str().unwrap();
        let stages: Vec<&str> = spans
            .iter()
            .filter(|s| s["parent_span_id"] == own)
            .filter_map(|s| s["name"].as_str())
            .collect();
        for stage in ["prepare", "dispatch", "finalize"] {
            assert!(stages.contains(&stage), "{call}: {stages:?}");
        }
        assert!(by_id.contains_key(own));
    }
}

#[test]
fn an_unsupported_otlp_protocol_is_a_warning_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.jsonl");
    std::fs::write(&script, "{\"role\":\"assistant\",\"content\":\"done\"}\n").unwrap();
    let run = run(dsh()
        .args(["run", s(&script), "--session"])
        .arg(dir.path().join("log.jsonl"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"));
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stderr
            .contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"),
        "{}",
        run.both()
    );
}
