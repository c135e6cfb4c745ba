//! REG lines that need the whole pipeline, through `Runtime::execute`: input materialization in
//! prepare (REG-27..33, Rust analogues), scoped visibility as execution sees it (REG-15, 19, 20),
//! and typed/raw definitions end to end (REG-37, 39, 40, 62, 63, 65, 66). The registry halves are
//! pinned in dsh-core. A property test pins the argument snapshot shared by every stage (S1).

// Tests state their expectations with `expect`: a panic is the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_core::{
    AbortController, AgentId, Arguments, Dispatch, ExecuteNext, ExecuteWrapper, ExecutionToken,
    Failure, Json, PostToolDecision, ToolDefinition, ToolExecution, ToolExecutionInput, ToolFilter,
    ToolOutput, ToolRegistry, ToolResult,
};
use dsh_guard::{Hooks, Scope};
use dsh_scheduler::Runtime;
use dsh_test_support::{PostFn, PreFn, Recorder, echo_tool, input, reply_tool, shape};
use parking_lot::Mutex;
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

fn runtime(tools: impl IntoIterator<Item = ToolDefinition>) -> Runtime {
    let registry = ToolRegistry::new();
    for t in tools {
        registry.register(t).expect("registers").keep();
    }
    Runtime::new(registry, Hooks::new())
}

fn names(rt: &Runtime, agent: Option<&AgentId>) -> BTreeSet<String> {
    rt.registry().names(agent).into_iter().collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

async fn run(rt: &Runtime, name: &str, agent: Option<&AgentId>) -> Arc<ToolResult> {
    let mut call = input("c1", name, json!({}));
    call.agent = agent.cloned();
    rt.execute(call).await
}

fn unknown(name: &str) -> Value {
    json!([text(&format!("Error: unknown tool \"{name}\""))])
}

/// Records the execution token a stage saw.
#[derive(Clone, Default)]
struct Tokens(Arc<Mutex<Vec<(String, ExecutionToken)>>>);

impl Tokens {
    fn see(&self, stage: &str, exec: &ToolExecution) {
        self.0
            .lock()
            .push((format!("{stage}:{}", exec.name()), exec.token()));
    }
    fn all(&self) -> Vec<(String, ExecutionToken)> {
        self.0.lock().clone()
    }
}

struct TokenWrapper(Tokens);

#[async_trait]
impl ExecuteWrapper for TokenWrapper {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.see("execute", call.exec());
        next.run(call).await
    }
}

#[tokio::test]
async fn reg_27_one_token_per_call_shared_by_every_stage() {
    let agent = AgentId::new("a");
    let tokens = Tokens::default();
    let body_args: Arc<Mutex<Option<Json>>> = Arc::default();
    let pre_args: Arc<Mutex<Option<Json>>> = Arc::default();
    let (safe_runs, danger_runs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (t, sr, ba) = (tokens.clone(), safe_runs.clone(), body_args.clone());
    let safe = ToolDefinition::builder("safe", "d")
        .output(ToolOutput::string())
        .execute(move |c| {
            sr.fetch_add(1, Ordering::SeqCst);
            t.see("body", c.exec());
            *ba.lock() = c.arguments().json().cloned();
            async { Ok(Json::string("safe")) }
        })
        .build()
        .expect("builds");
    let dr = danger_runs.clone();
    let danger = ToolDefinition::builder("danger", "d")
        .output(ToolOutput::string())
        .execute(move |_c| {
            dr.fetch_add(1, Ordering::SeqCst);
            async { Ok(Json::string("danger")) }
        })
        .build()
        .expect("builds");
    let rt = runtime([safe, danger]);
    let (t, pa) = (tokens.clone(), pre_args.clone());
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |e: &ToolExecution| {
            t.see("pre", e);
            if e.name() == "safe" {
                *pa.lock() = e.arguments().json().cloned();
            }
            Ok(None)
        }),
    );
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, TokenWrapper(tokens.clone()));
    let t = tokens.clone();
    let _post = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                t.see("post", e);
                Ok(d)
            },
        ),
    );
    let _guard = rt
        .hooks()
        .add_guard(Scope::Agent(agent.clone()), |e: &ToolExecution| {
            (e.name() == "danger").then(|| "danger denied".to_owned())
        });
    let observed = Arc::new(AtomicUsize::new(0));
    let (o, t) = (observed.clone(), tokens.clone());
    let _obs = rt.hooks().on_result(
        Scope::Agent(agent.clone()),
        move |e: &ToolExecution, _r: &ToolResult| {
            o.fetch_add(1, Ordering::SeqCst);
            t.see("result", e);
        },
    );
    let caller_args = json!({"path": "/etc/hosts", "flags": ["a", "b"], "nested": {"k": 1}});
    let kept = caller_args.clone();
    let d = rt
        .execute(input("d1", "danger", json!({})).with_agent(agent.clone()))
        .await;
    assert_eq!(shape(&d)["content"], json!([text("Error: danger denied")]));
    let s = rt
        .execute(input("s1", "safe", caller_args).with_agent(agent.clone()))
        .await;
    assert!(!s.is_error(), "{}", shape(&s));
    // The body sees the frozen snapshot the policy saw: one allocation, equal to the input.
    let (b, p) = (
        body_args.lock().clone().expect("body args"),
        pre_args.lock().clone().expect("pre args"),
    );
    assert!(Json::ptr_eq(&b, &p));
    assert_eq!(b.value(), &kept);

    let seen = tokens.all();
    let distinct: BTreeSet<ExecutionToken> = seen.iter().map(|(_, t)| *t).collect();
    assert_eq!(distinct.len(), 2, "{seen:?}");
    let of = |stage: &str| seen.iter().find(|(s, _)| s == stage).map(|(_, t)| *t);
    let danger_token = of("pre:danger").expect("pre saw danger");
    assert_eq!(of("post:danger"), Some(danger_token));
    assert_eq!(of("result:danger"), Some(danger_token));
    let safe_token = of("pre:safe").expect("pre saw safe");
    for stage in ["execute:safe", "body:safe", "post:safe", "result:safe"] {
        assert_eq!(of(stage), Some(safe_token), "{stage}");
    }
    assert_eq!(safe_runs.load(Ordering::SeqCst), 1);
    assert_eq!(danger_runs.load(Ordering::SeqCst), 0);
    assert_eq!(observed.load(Ordering::SeqCst), 2);
}

/// What a `tools/result` observer saw of one execution.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    call_id: String,
    root_call_id: String,
    name: String,
    agent: Option<AgentId>,
    parent: Option<ExecutionToken>,
    same_signal: bool,
    raw_arguments: Option<String>,
    is_error: bool,
}

fn observe(
    rt: &Runtime,
    scope: Scope,
    signal: &dsh_core::Signal,
) -> (Arc<Mutex<Vec<Observed>>>, dsh_guard::HookHandle) {
    let log: Arc<Mutex<Vec<Observed>>> = Arc::default();
    let (l, s) = (log.clone(), signal.clone());
    let h = rt
        .hooks()
        .on_result(scope, move |e: &ToolExecution, r: &ToolResult| {
            l.lock().push(Observed {
                call_id: e.call_id().to_owned(),
                root_call_id: e.root_call_id().to_owned(),
                name: e.name().to_owned(),
                agent: e.agent().cloned(),
                parent: e.parent(),
                same_signal: dsh_core::Signal::same(e.signal(), &s),
                raw_arguments: match e.arguments() {
                    Arguments::Raw(raw) => Some(raw.to_string()),
                    Arguments::Json(_) => None,
                },
                is_error: r.is_error(),
            });
        });
    (log, h)
}

#[tokio::test]
async fn reg_28_arguments_that_are_not_json_reach_the_tool_raw_and_fail_its_validation() {
    // Deviation by spec S1: arguments that are not JSON are passed on as the raw text (policy
    // sees them), and a validating tool fails them with INVALID_ARGS instead of the reference's
    // `losslessly JSON-serializable` error. The body never runs either way.
    let agent = AgentId::new("a");
    let rt = runtime([echo_tool()]);
    let pre = Recorder::new();
    let p = pre.clone();
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |e: &ToolExecution| {
            p.push(e.call_id().to_owned());
            Ok(None)
        }),
    );
    let caller = AbortController::new();
    let (scoped, _s) = observe(&rt, Scope::Agent(agent.clone()), &caller.signal());
    let (global, _g) = observe(&rt, Scope::Global, &caller.signal());
    let parent = ExecutionToken::fresh();
    let raw = "{\"text\": (a function)}";
    let with_agent = ToolExecutionInput::new("c1", "echo", Arguments::from_raw(raw))
        .with_agent(agent.clone())
        .with_parent(parent, Arc::from("root"))
        .with_signal(caller.signal());
    let without_agent = ToolExecutionInput::new("c2", "echo", Arguments::from_raw(raw))
        .with_parent(parent, Arc::from("root"))
        .with_signal(caller.signal());
    for call in [with_agent, without_agent] {
        let r = rt.execute(call).await;
        let e = r.error().expect("fails");
        assert_eq!(e.code(), Some("INVALID_ARGS"), "{}", shape(&r));
        assert!(
            e.message().contains("arguments must be a JSON object"),
            "{}",
            e.message()
        );
    }
    assert_eq!(pre.entries(), ["c1", "c2"]);
    let scoped = scoped.lock().clone();
    assert_eq!(scoped.len(), 1);
    assert_eq!(global.lock().len(), 2);
    let o = &scoped[0];
    assert_eq!(
        o.raw_arguments.as_deref(),
        Some(raw),
        "the raw text, verbatim"
    );
    assert_eq!(o.parent, Some(parent));
    assert!(o.same_signal);
    assert!(o.is_error);
}

/// Records the address of the execution each stage sees.
#[derive(Clone, Default)]
struct Addresses(Recorder);

impl Addresses {
    fn see(&self, stage: &str, exec: &ToolExecution) {
        self.0.push(format!(
            "{stage}:{:x}:{:?}",
            exec as *const ToolExecution as usize,
            exec.parent()
        ));
    }
}

struct AddressWrapper(Addresses);

#[async_trait]
impl ExecuteWrapper for AddressWrapper {
    async fn around(&self, call: Dispatch, next: ExecuteNext<'_>) -> Result<ToolResult, Failure> {
        self.0.see("execute", call.exec());
        next.run(call).await
    }
}

#[tokio::test]
async fn reg_29_every_stage_sees_the_one_execution_the_input_was_moved_into() {
    // TS-only mechanism (an accessor read once). Rust analogue: the input is moved into one
    // `ToolExecution` when the call is frozen, and every stage borrows that same execution.
    let addrs = Addresses::default();
    let a = addrs.clone();
    let tool = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(move |c| {
            a.see("body", c.exec());
            async { Ok(Json::string("ran:t")) }
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let a = addrs.clone();
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |e: &ToolExecution| {
            a.see("pre", e);
            Ok(None)
        }),
    );
    let _w = rt
        .hooks()
        .on_execute(Scope::Global, AddressWrapper(addrs.clone()));
    let a = addrs.clone();
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |e: &ToolExecution, _r: &ToolResult| {
            a.see("result", e)
        });
    let r = rt.execute(input("c1", "t", json!({}))).await;
    assert!(!r.is_error());
    let seen = addrs.0.entries();
    assert_eq!(seen.len(), 4, "{seen:?}");
    let suffixes: BTreeSet<&str> = seen
        .iter()
        .map(|s| s.split_once(':').expect("stage").1)
        .collect();
    assert_eq!(
        suffixes.len(),
        1,
        "one execution, parent None everywhere: {seen:?}"
    );
    assert!(seen[0].ends_with(":None"));
}

#[tokio::test]
async fn reg_30_the_observed_execution_holds_the_input_fields() {
    // TS-only mechanism (accessors changing after the first read); Rust: by construction.
    let agent = AgentId::new("a");
    let rt = runtime([echo_tool()]);
    let caller = AbortController::new();
    let (scoped, _s) = observe(&rt, Scope::Agent(agent.clone()), &caller.signal());
    let parent = ExecutionToken::fresh();
    let call = input("c7", "echo", json!({"text": 5}))
        .with_agent(agent.clone())
        .with_parent(parent, Arc::from("root-1"))
        .with_signal(caller.signal());
    let r = rt.execute(call).await;
    assert_eq!(r.error().and_then(Failure::code), Some("INVALID_ARGS"));
    assert_eq!(
        scoped.lock().clone(),
        [Observed {
            call_id: "c7".into(),
            root_call_id: "root-1".into(),
            name: "echo".into(),
            agent: Some(agent),
            parent: Some(parent),
            same_signal: true,
            raw_arguments: None,
            is_error: true,
        }]
    );
}

// REG-31 skipped: TS-only (an arguments accessor that throws); Rust arguments are a value
// moved into the input, with nothing to run when they are read.
// REG-32 skipped: TS-only. The runtime accepts only `Arguments` (JSON or the raw text), so a
// typed caller value that cannot convert fails at the caller, before any execution exists.

#[tokio::test]
async fn reg_33_arguments_are_snapshotted_once_and_the_call_succeeds_exactly() {
    // TS-only mechanism (an accessor turning non-JSON after the first read). Rust analogue:
    // the snapshot the body reads is the value the caller passed.
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let s = seen.clone();
    let reply = reply_tool("t");
    let probe = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(move |c| {
            *s.lock() = c.arguments().json().map(|j| j.value().clone());
            let body = reply.body().clone();
            async move { body.execute(c).await }
        })
        .build()
        .expect("builds");
    let r = runtime([probe])
        .execute(input("c1", "t", json!({"field": "safe"})))
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("ran:t")], "isError": false, "value": "ran:t"})
    );
    assert_eq!(seen.lock().clone(), Some(json!({"field": "safe"})));
}

#[tokio::test]
async fn reg_15_a_tool_outside_the_callers_view_is_an_unknown_tool() {
    let (a, b) = (AgentId::new("a"), AgentId::new("b"));
    let rt = runtime([reply_tool("shared")]);
    rt.registry()
        .register_scoped(&a, reply_tool("mine"))
        .expect("registers")
        .keep();
    assert_eq!(names(&rt, Some(&a)), set(&["mine", "shared"]));
    assert_eq!(names(&rt, None), set(&["shared"]));
    assert_eq!(names(&rt, Some(&b)), set(&["shared"]));
    let mine = run(&rt, "mine", Some(&a)).await;
    assert_eq!(shape(&mine)["content"], json!([text("ran:mine")]));
    for agent in [Some(&b), None] {
        let r = run(&rt, "mine", agent).await;
        assert_eq!(shape(&r)["content"], unknown("mine"), "{agent:?}");
        assert_eq!(r.error().and_then(Failure::code), Some("UNKNOWN_TOOL"));
    }
    assert_eq!(
        shape(&*run(&rt, "shared", Some(&b)).await)["content"],
        json!([text("ran:shared")])
    );
}

#[tokio::test]
async fn reg_19_restrictions_filter_only_inherited_tools_and_execution_matches_the_prompt() {
    let a = AgentId::new("a");
    let rt = runtime([reply_tool("read"), reply_tool("bash")]);
    rt.registry()
        .register_scoped(&a, reply_tool("capture"))
        .expect("registers")
        .keep();
    rt.registry()
        .restrict(Some(&a), ToolFilter::Allow(vec!["read".into()]))
        .expect("restricts")
        .keep();
    assert_eq!(names(&rt, Some(&a)), set(&["capture", "read"]));
    assert_eq!(names(&rt, None), set(&["bash", "read"]));
    assert_eq!(
        shape(&*run(&rt, "bash", Some(&a)).await)["content"],
        unknown("bash")
    );
    for tool in ["read", "capture"] {
        let r = run(&rt, tool, Some(&a)).await;
        assert_eq!(shape(&r)["content"], json!([text(&format!("ran:{tool}"))]));
    }
    assert_eq!(
        shape(&*run(&rt, "bash", None).await)["content"],
        json!([text("ran:bash")])
    );
}

#[tokio::test]
async fn reg_20_filters_apply_to_globals_registered_later() {
    let (deny, allow) = (AgentId::new("deny-scope"), AgentId::new("allow-scope"));
    let rt = runtime([reply_tool("read"), reply_tool("bash")]);
    let reg = rt.registry();
    let _d = reg.declare_scope(&deny, None);
    let _a = reg.declare_scope(&allow, None);
    reg.restrict(Some(&deny), ToolFilter::Deny(vec!["bash".into()]))
        .expect("restricts")
        .keep();
    reg.restrict(Some(&allow), ToolFilter::Allow(vec!["read".into()]))
        .expect("restricts")
        .keep();
    reg.register(reply_tool("web")).expect("registers").keep();
    reg.register_scoped(&deny, reply_tool("denied-local"))
        .expect("registers")
        .keep();
    reg.register_scoped(&allow, reply_tool("allowed-local"))
        .expect("registers")
        .keep();
    assert_eq!(
        names(&rt, Some(&deny)),
        set(&["denied-local", "read", "web"])
    );
    assert_eq!(names(&rt, Some(&allow)), set(&["allowed-local", "read"]));
    assert_eq!(
        shape(&*run(&rt, "web", Some(&deny)).await)["content"],
        json!([text("ran:web")])
    );
    assert_eq!(
        shape(&*run(&rt, "web", Some(&allow)).await)["content"],
        unknown("web")
    );
    for (agent, local) in [(&deny, "denied-local"), (&allow, "allowed-local")] {
        let r = run(&rt, local, Some(agent)).await;
        assert_eq!(shape(&r)["content"], json!([text(&format!("ran:{local}"))]));
    }
}

/// `text` (required) and `uppercase` (optional).
#[derive(Deserialize, JsonSchema)]
struct Shout {
    text: String,
    uppercase: Option<bool>,
}

#[tokio::test]
async fn reg_37_a_typed_tool_end_to_end() {
    let tool = ToolDefinition::builder("shout", "d")
        .output(ToolOutput::string())
        .execute_typed(|a: Shout, _c| async move {
            Ok(if a.uppercase == Some(true) {
                a.text.to_uppercase()
            } else {
                a.text
            })
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let schema = rt.registry().schemas(None)[0].parameters.value().clone();
    assert_eq!(schema["required"], json!(["text"]));
    let r = rt
        .execute(input(
            "c1",
            "shout",
            json!({"text": "hello", "uppercase": true}),
        ))
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("HELLO")], "isError": false, "value": "HELLO"})
    );
}

/// `req` (required) and `opt` (optional).
#[derive(Deserialize, JsonSchema)]
struct ReqOpt {
    req: String,
    opt: Option<String>,
}

#[tokio::test]
async fn reg_39_register_project_and_execute_a_typed_definition() {
    let tool = ToolDefinition::builder("reqopt", "d")
        .output(ToolOutput::string())
        .execute_typed(|a: ReqOpt, _c| async move {
            Ok(format!("{}:{}", a.req, a.opt.as_deref().unwrap_or("none")))
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let schema = rt.registry().schemas(None)[0].parameters.value().clone();
    assert_eq!(schema["required"], json!(["req"]));
    assert!(schema["properties"].get("opt").is_some());
    let r = rt
        .execute(input("c1", "reqopt", json!({"req": "hello"})))
        .await;
    assert_eq!(shape(&r)["content"], json!([text("hello:none")]));
}

fn raw_path_tool(runs: &Arc<AtomicUsize>) -> (ToolDefinition, Value) {
    let schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string", "description": "A path"}},
        "required": ["path"],
        "x-adapter": {"origin": "mcp"}
    });
    let runs = runs.clone();
    let tool = ToolDefinition::builder("mcp_read", "an adapter's tool")
        .parameters(Json::from_shallow(schema.clone()))
        .output(ToolOutput::string())
        .execute(move |c| {
            runs.fetch_add(1, Ordering::SeqCst);
            let path = c
                .arguments()
                .json()
                .and_then(|j| j.value()["path"].as_str().map(str::to_owned))
                .unwrap_or_default();
            async move { Ok(Json::string(path)) }
        })
        .build()
        .expect("builds");
    (tool, schema)
}

#[tokio::test]
async fn reg_40_a_raw_schema_is_projected_verbatim_and_runs() {
    let (tool, schema) = raw_path_tool(&Arc::default());
    let rt = runtime([tool]);
    assert_eq!(rt.registry().schemas(None)[0].parameters.value(), &schema);
    let r = rt
        .execute(input("c1", "mcp_read", json!({"path": "/tmp"})))
        .await;
    assert!(!r.is_error());
    assert_eq!(shape(&r)["content"], json!([text("/tmp")]));
}

/// `path` (required).
#[derive(Deserialize, JsonSchema)]
struct ReadPath {
    path: String,
}

fn typed_read(runs: &Arc<AtomicUsize>) -> ToolDefinition {
    let runs = runs.clone();
    ToolDefinition::builder("read", "d")
        .output(ToolOutput::content_blocks())
        .execute_typed(move |a: ReadPath, _c| {
            runs.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!([{"type": "text", "text": format!("read {}", a.path)}])) }
        })
        .build()
        .expect("builds")
}

#[tokio::test]
async fn reg_62_missing_required_argument_fails_before_the_body() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runtime([typed_read(&runs)])
        .execute(input("c1", "read", json!({})))
        .await;
    assert!(r.is_error());
    assert_eq!(
        shape(&r)["content"],
        json!([text(
            "Error: invalid arguments: missing required property \"path\""
        )])
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn reg_63_valid_arguments_give_exactly_the_rendered_success() {
    let r = runtime([typed_read(&Arc::default())])
        .execute(input("c1", "read", json!({"path": "/x"})))
        .await;
    assert_eq!(
        shape(&r),
        json!({"content": [text("read /x")], "isError": false, "value": [text("read /x")]})
    );
}

#[tokio::test]
async fn reg_65_the_error_of_schema_invalid_arguments() {
    let r = runtime([typed_read(&Arc::default())])
        .execute(input("c1", "read", json!({})))
        .await;
    assert_eq!(
        shape(&r)["error"],
        json!({
            "message": "invalid arguments: missing required property \"path\"",
            "info": {"name": "ToolArgsError", "code": "INVALID_ARGS"},
        })
    );
}

#[tokio::test]
async fn reg_66_raw_tools_validate_themselves() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (tool, _schema) = raw_path_tool(&runs);
    let r = runtime([tool])
        .execute(input("c1", "mcp_read", json!({})))
        .await;
    assert!(!r.is_error(), "{}", shape(&r));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// A small JSON value for arguments.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every stage's view of the arguments, as `(stage, snapshot)`.
type ArgViews = Arc<Mutex<Vec<(&'static str, Json)>>>;

fn snapshot_case(args: Value) -> Vec<(&'static str, Json)> {
    let views: ArgViews = Arc::default();
    let v = views.clone();
    let tool = ToolDefinition::builder("t", "d")
        .output(ToolOutput::string())
        .execute(move |c| {
            if let Some(j) = c.arguments().json() {
                v.lock().push(("body", j.clone()));
            }
            async { Ok(Json::string("ok")) }
        })
        .build()
        .expect("builds");
    let rt = runtime([tool]);
    let v = views.clone();
    let _pre = rt.hooks().on_pre_execute(
        Scope::Global,
        PreFn(move |e: &ToolExecution| {
            if let Some(j) = e.arguments().json() {
                v.lock().push(("pre", j.clone()));
            }
            Ok(None)
        }),
    );
    let v = views.clone();
    let _post = rt.hooks().on_post_execute(
        Scope::Global,
        PostFn(
            move |e: &ToolExecution, _r: &ToolResult, d: PostToolDecision| {
                if let Some(j) = e.arguments().json() {
                    v.lock().push(("post", j.clone()));
                }
                Ok(d)
            },
        ),
    );
    let v = views.clone();
    let _o = rt
        .hooks()
        .on_result(Scope::Global, move |e: &ToolExecution, _r: &ToolResult| {
            if let Some(j) = e.arguments().json() {
                v.lock().push(("result", j.clone()));
            }
        });
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(rt.execute(input("c1", "t", args)));
    views.lock().clone()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// S1: the arguments are frozen once; every stage sees that one snapshot, equal to the input.
    #[test]
    fn reg_27_every_stage_sees_one_frozen_argument_snapshot(args in json_value()) {
        let views = snapshot_case(args.clone());
        let stages: Vec<&str> = views.iter().map(|(s, _)| *s).collect();
        prop_assert_eq!(stages, vec!["pre", "body", "post", "result"]);
        for (stage, j) in &views {
            prop_assert!(Json::ptr_eq(j, &views[0].1), "{} holds a copy", stage);
            prop_assert_eq!(j.value(), &args);
        }
    }
}
