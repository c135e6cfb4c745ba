//! The agent loop beside its baselines, measured in the same run (`cargo xtask bench` turns
//! them into ratios of BENCHMARKS.md):
//!
//! - `agent/stream-10k` vs `agent/parse-10k`: one turn whose answer is 10,000 streamed text
//!   chunks, from the mock provider on 127.0.0.1 through the OpenAI-compatible adapter (HTTP,
//!   SSE, chunk parsing, the idle watchdog) and the loop (assembly, the chunk events in the
//!   in-memory session, the `assistant/message`), vs `serde_json` parsing the same 10,000 chunk
//!   payloads into `Value`s;
//! - `agent/to-first-body` vs `agent/direct-call`: from the last chunk of an assistant message
//!   calling a no-op tool to that tool's body starting (the message committed, the step
//!   scheduled, the call prepared), vs one direct call of the same tool through the same
//!   pipeline (`Runtime::execute`);
//! - `agent/resume-100k` vs `agent/parse-100k`: opening a 100,000-event log file for writing
//!   (its crash-repair scan included), deriving its history and building the next request
//!   (the provider-neutral `Request`; its serialization happens as it is sent), vs `serde_json`
//!   parsing every line of the same file.
//!
//! Timing is wall time measured inside a task on the multi-thread runtime; no assertion is made
//! about it.

// A benchmark whose setup fails must stop loudly.
#![allow(clippy::expect_used)]

#[path = "fixtures/events.rs"]
#[allow(dead_code)]
mod events;
#[path = "fixtures/pipeline.rs"]
#[allow(dead_code)] // The fixtures serve several benchmarks; this one uses part of them.
mod fixtures;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use dsh::core::{Arguments, Json, ToolDefinition, ToolExecutionInput, ToolOutput, ToolRegistry};
use dsh::scheduler::Runtime;
use dsh::session::{OpenOptions, Session};
use dsh_agent::{Agent, AgentConfig, AgentHooks, provider_messages};
use dsh_model::{Chunk, Message, OpenAiConfig, OpenAiProvider, Request};
use dsh_test_support::mock_provider::{Frame, MockProvider, Reply, openai};
use parking_lot::Mutex;

use fixtures::{in_task, pass_through_hooks, tokio_runtime};

/// Text chunks of the streamed answer.
const CHUNKS: usize = 10_000;
/// Events of the resumed log.
const RESUME_EVENTS: usize = 100_000;

fn provider(server: &MockProvider) -> Arc<OpenAiProvider> {
    Arc::new(
        OpenAiProvider::new(
            OpenAiConfig::deepseek()
                .with_base_url(&server.openai_base_url())
                .with_api_key("sk-bench"),
        )
        .expect("provider"),
    )
}

/// The chunk payloads of the streamed answer and the reply carrying them as SSE.
fn long_answer() -> (Vec<String>, Reply) {
    let payloads: Vec<String> = (0..CHUNKS)
        .map(|i| openai::chunk(serde_json::json!({"content": format!("w{i} ")}), None).to_string())
        .collect();
    let mut sse = String::with_capacity(payloads.iter().map(|p| p.len() + 8).sum());
    for p in &payloads {
        sse.push_str("data: ");
        sse.push_str(p);
        sse.push_str("\n\n");
    }
    let mut frames = vec![openai::role(), Frame::Bytes(sse)];
    frames.extend(openai::finish("stop", 10, CHUNKS as u64));
    (payloads, Reply::Stream(frames))
}

fn stream(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("agent");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let server = rt.block_on(MockProvider::start()).expect("mock provider");
    let provider = provider(&server);
    let (payloads, reply) = long_answer();
    let runtime = Arc::new(Runtime::new(ToolRegistry::new(), pass_through_hooks()));
    g.bench_function("stream-10k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                server.push(reply.clone());
                let agent = Agent::new(
                    runtime.clone(),
                    Session::in_memory("bench"),
                    AgentConfig::new(provider.clone(), "deepseek-chat"),
                );
                total += in_task(rt, move || async move {
                    let start = Instant::now();
                    let outcome = agent.prompt("go").await.expect("a turn");
                    let took = start.elapsed();
                    assert!(outcome.is_some_and(|o| o.text.len() > CHUNKS));
                    took
                });
            }
            total
        })
    });
    g.bench_function("parse-10k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let values: Vec<serde_json::Value> = payloads
                    .iter()
                    .map(|p| serde_json::from_str(p).expect("a chunk"))
                    .collect();
                total += start.elapsed();
                black_box(&values);
            }
            total
        })
    });
    g.finish();
}

/// Records when each chunk arrived.
struct ChunkTimes(Arc<Mutex<Vec<Instant>>>);

impl AgentHooks for ChunkTimes {
    fn on_chunk(&self, _agent: &Agent, _turn: u32, _step: u32, _chunk: &Chunk) {
        self.0.lock().push(Instant::now());
    }
}

fn first_body(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("agent");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat);
    let server = rt.block_on(MockProvider::start()).expect("mock provider");
    let provider = provider(&server);
    let started: Arc<Mutex<Option<Instant>>> = Arc::default();
    let registry = ToolRegistry::new();
    let mark = started.clone();
    registry
        .add(
            ToolDefinition::builder("noop", "Marks when it starts.")
                .output(ToolOutput::string())
                .execute(move |_ctx| {
                    *mark.lock() = Some(Instant::now());
                    async { Ok(Json::string("ok")) }
                })
                .build()
                .expect("the tool"),
        )
        .expect("register");
    let runtime = Arc::new(Runtime::new(registry, pass_through_hooks()));
    let mut call = vec![openai::role()];
    call.extend(openai::tool_call(0, "c1", "noop", &["{}"]));
    // The closing events in one write, as a provider flushes them: the last chunk the loop
    // sees arrives with the last byte of the message.
    let closing: String = openai::finish("tool_calls", 10, 2)
        .into_iter()
        .map(|f| match f {
            Frame::Bytes(text) => text,
            other => panic!("a closing frame is bytes, not {other:?}"),
        })
        .collect();
    call.push(Frame::Bytes(closing));
    let call = Reply::Stream(call);
    let done = openai::text_reply(&["done"]);
    g.bench_function("to-first-body", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                server.push_all([call.clone(), done.clone()]);
                let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
                let agent = Agent::new(
                    runtime.clone(),
                    Session::in_memory("bench"),
                    AgentConfig::new(provider.clone(), "deepseek-chat"),
                );
                agent.set_hooks(ChunkTimes(times.clone()));
                let body = started.clone();
                total += in_task(rt, move || async move {
                    agent.prompt("go").await.expect("a turn");
                    let body = body.lock().take().expect("the body ran");
                    // The last chunk of the message that called the tool: the last one before
                    // the body started (the answer to its result streams after).
                    let last = times
                        .lock()
                        .iter()
                        .copied()
                        .filter(|t| *t <= body)
                        .max()
                        .expect("chunks before the body");
                    body.duration_since(last)
                });
            }
            total
        })
    });
    g.bench_function("direct-call", |b| {
        b.iter_custom(|iters| {
            let runtime = runtime.clone();
            in_task(rt, move || async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let result = runtime
                        .execute(ToolExecutionInput::new(
                            "c1",
                            "noop",
                            Arguments::from_raw("{}"),
                        ))
                        .await;
                    black_box(result);
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

fn resume(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut g = c.benchmark_group("agent");
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(8))
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat);
    let dir = tempfile::tempdir().expect("temp dir");
    let original = dir.path().join("log.jsonl");
    let bytes = events::log_text(RESUME_EVENTS);
    std::fs::write(&original, &bytes).expect("write the log");
    g.bench_function("resume-100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let path = dir.path().join(format!("resume-{i}.jsonl"));
                std::fs::copy(&original, &path).expect("copy the log");
                total += in_task(rt, move || async move {
                    let start = Instant::now();
                    let (session, _) = Session::open_jsonl(&path, OpenOptions::new())
                        .await
                        .expect("open the log");
                    let mut messages = vec![Message::system("You are a bench.")];
                    messages.extend(provider_messages(session.events().pairs()));
                    let request = Request::new("deepseek-chat", messages);
                    let took = start.elapsed();
                    assert!(request.messages.len() > RESUME_EVENTS / 3);
                    black_box(&request);
                    session.close().await.expect("close");
                    let _ = std::fs::remove_file(&path);
                    took
                });
            }
            total
        })
    });
    g.bench_function("parse-100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let values = events::parse_lines(&bytes);
                total += start.elapsed();
                black_box(&values);
            }
            total
        })
    });
    g.finish();
}

fn main() {
    let rt = tokio_runtime();
    let mut c = Criterion::default().configure_from_args();
    stream(&mut c, &rt);
    first_body(&mut c, &rt);
    resume(&mut c, &rt);
    c.final_summary();
}
