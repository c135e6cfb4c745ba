//! Property tests: rendering round trips, lossless crossing of values, and the sub-dispatch
//! invariants (ids, start and commit order, pairing, exclusive calls alone).

use std::time::Duration;

use dsh_code_mode::{PRETTY_DEPTH, render_result};
use dsh_core::{Json, ToolExecution};
use dsh_test_support::Recorder;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::support::*;

/// JSON values as a JavaScript program can hold them exactly: integers within 32 bits and
/// floats with a fractional part (JavaScript has one number type, so `1.0` comes back as `1`).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        (-1000i32..1000, 2u32..100).prop_map(|(a, b)| json!(f64::from(a) + 1.0 / f64::from(b))),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_$]{0,6}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn nest(mut v: Value, depth: usize) -> Value {
    for i in 0..depth {
        v = if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            let mut m = Map::new();
            m.insert("k".into(), v);
            Value::Object(m)
        };
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Rendering is pretty JSON that parses back to the value; shallow values render exactly
    /// as serde's pretty printer does, deep ones stay proportional to the value.
    #[test]
    fn rendered_results_parse_back_to_the_value(v in json_value(), extra in 0usize..40) {
        let deep = nest(v, extra);
        let text = render_result(&deep);
        if let Value::String(s) = &deep {
            prop_assert_eq!(&text, s);
        } else {
            let back: Value = serde_json::from_str(&text).expect("renders JSON");
            prop_assert_eq!(&back, &deep);
            if dsh_core::json::depth_of(&deep) <= PRETTY_DEPTH {
                prop_assert_eq!(&text, &serde_json::to_string_pretty(&deep).expect("pretty"));
            }
            let compact = serde_json::to_string(&deep).expect("compact").len();
            prop_assert!(text.len() <= compact + 64 * (PRETTY_DEPTH + 1) * (compact / 2 + 1));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A value crosses program → host → program → host unchanged.
    #[test]
    fn values_cross_the_bridge_losslessly(v in json_value()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let host = fn_host(|_name, args| Ok(args.clone()));
        let literal = serde_json::to_string(&serde_json::to_string(&json!({"v": v})).expect("text")).expect("lit");
        let program = format!("const r = await tools.id(JSON.parse({literal})); return r.v");
        let o = rt.block_on(run_with(&program, &["id"], host.clone(), fast_limits()));
        prop_assert_eq!(&o.error, &None);
        prop_assert_eq!(o.value.map(|j| j.value().clone()), Some(v.clone()));
        let calls = host.calls.lock();
        prop_assert_eq!(calls[0].1.value(), &json!({"v": v}));
    }
}

fn timed_tool(name: &'static str, parallel: bool, rec: Recorder) -> dsh_core::ToolDefinition {
    tool_fn(name, parallel, move |ctx| {
        let rec = rec.clone();
        async move {
            let exec: &ToolExecution = ctx.exec();
            let id = exec
                .call_id()
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            let ms = ctx
                .arguments()
                .json()
                .and_then(|j| j.value().get("ms").and_then(Value::as_u64))
                .unwrap_or(0);
            rec.push(format!("start:{id}"));
            tokio::time::sleep(Duration::from_millis(ms)).await;
            rec.push(format!("end:{id}"));
            Ok(Json::string(id))
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever mix of parallel and exclusive calls a program launches at once: ids follow
    /// submission order, records start and settle in submission order and pair up, the pool
    /// is respected, and an exclusive call overlaps nothing.
    #[test]
    fn sub_dispatch_order_pairing_and_barriers(
        calls in prop::collection::vec((any::<bool>(), 0u64..4), 1..8),
        pool in 1usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("rt");
        let rec = Recorder::new();
        let (events, starts, settles, result) = rt.block_on(async {
            let h = Harness::new(
                vec![timed_tool("par", true, rec.clone()), timed_tool("exc", false, rec.clone())],
                |c| c.max_parallel_sub_calls = pool,
            )
            .await;
            let list: Vec<String> = calls
                .iter()
                .map(|(parallel, ms)| {
                    format!("tools.{}({{ms: {ms}}})", if *parallel { "par" } else { "exc" })
                })
                .collect();
            let r = h
                .run_code(&format!("return (await Promise.all([{}])).join(',')", list.join(", ")))
                .await;
            assert_paired(&h.dispatch_records());
            (rec.entries(), h.starts(), h.settles(), value_of(&r)["result"].clone())
        });
        let n = calls.len();
        let ids: Vec<String> = (1..=n).map(|i| format!("call-1:code:{i}")).collect();
        prop_assert_eq!(&starts, &ids);
        prop_assert_eq!(&settles, &ids);
        let expected: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        prop_assert_eq!(result, json!(expected.join(",")));
        // Intervals from the body records.
        let pos = |e: &str| events.iter().position(|x| x == e).expect("recorded");
        let mut live = 0usize;
        let mut peak = 0usize;
        for e in &events {
            if e.starts_with("start:") { live += 1; peak = peak.max(live); } else { live -= 1; }
        }
        prop_assert!(peak <= pool, "peak {} > pool {}", peak, pool);
        for (i, (parallel, _)) in calls.iter().enumerate() {
            if *parallel { continue; }
            let (s, e) = (pos(&format!("start:{}", i + 1)), pos(&format!("end:{}", i + 1)));
            for j in 1..=n {
                if j == i + 1 { continue; }
                let (sj, ej) = (pos(&format!("start:{j}")), pos(&format!("end:{j}")));
                prop_assert!(ej < s || sj > e, "call {} overlaps exclusive call {}", j, i + 1);
                if j < i + 1 { prop_assert!(ej < s); } else { prop_assert!(sj > e); }
            }
        }
    }
}

/// A parallel-safe tool whose body completes at once for `ms: 0` (it never awaits) and
/// otherwise sleeps that long first; it answers with its sub-call number.
fn at_once_or_later(rec: Recorder) -> dsh_core::ToolDefinition {
    tool_fn("work", true, move |ctx| {
        let rec = rec.clone();
        let id = ctx
            .exec()
            .call_id()
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        let ms = ctx
            .arguments()
            .json()
            .and_then(|j| j.value().get("ms").and_then(Value::as_u64))
            .unwrap_or(0);
        async move {
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            rec.push(id.clone());
            Ok(Json::string(id))
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Bodies that complete where the program calls them and bodies that wait and continue
    /// as tasks, mixed in any order, awaited one by one or all at once: ids, start and settle
    /// records keep submission order and pair up, and every answer reaches its own call.
    #[test]
    fn immediate_and_waiting_bodies_keep_order_and_pairing(
        waits in prop::collection::vec(prop_oneof![Just(0u64), 1u64..4], 1..10),
        all_at_once in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("rt");
        let rec = Recorder::new();
        let (bodies, starts, settles, result) = rt.block_on(async {
            let h = Harness::new(vec![at_once_or_later(rec.clone())], |_| {}).await;
            let calls: Vec<String> = waits.iter().map(|ms| format!("tools.work({{ms: {ms}}})")).collect();
            let program = if all_at_once {
                format!("return (await Promise.all([{}])).join(',')", calls.join(", "))
            } else {
                let body: String = calls.iter().map(|c| format!("r.push(await {c}); ")).collect();
                format!("const r = []; {body}return r.join(',')")
            };
            let r = h.run_code(&program).await;
            assert_paired(&h.dispatch_records());
            (rec.entries(), h.starts(), h.settles(), value_of(&r)["result"].clone())
        });
        let n = waits.len();
        let ids: Vec<String> = (1..=n).map(|i| format!("call-1:code:{i}")).collect();
        prop_assert_eq!(&starts, &ids);
        prop_assert_eq!(&settles, &ids);
        prop_assert_eq!(bodies.len(), n);
        let expected: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        prop_assert_eq!(result, json!(expected.join(",")));
    }
}
