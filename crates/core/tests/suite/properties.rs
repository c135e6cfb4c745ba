//! Property tests: REG-75..80 for the validator over random schemas, the JSON round trip,
//! argument materialization, and signal fusion (first reason wins, one-way).

use dsh_core::validate::{check_schema, validate};
use dsh_core::{
    AbortController, AbortReason, Arguments, CancelCause, Json, Signal, TimeoutReason,
    ToolDefinition, ToolOutput,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// A random parameter spec (the shapes the reference's DSL can express).
#[derive(Clone, Debug)]
enum Spec {
    Str(Option<Vec<String>>),
    Num(Option<Vec<i64>>),
    Int,
    Bool,
    Arr(Option<Box<Spec>>),
    Obj(Vec<(String, Spec, bool)>),
}

fn leaf() -> BoxedStrategy<Spec> {
    prop_oneof![
        prop::option::of(prop::collection::vec("[a-z]{1,4}", 1..4)).prop_map(Spec::Str),
        prop::option::of(prop::collection::vec(
            any::<i32>().prop_map(i64::from),
            1..4
        ))
        .prop_map(Spec::Num),
        Just(Spec::Int),
        Just(Spec::Bool),
    ]
    .boxed()
}

fn object_of(inner: BoxedStrategy<Spec>) -> BoxedStrategy<Spec> {
    prop::collection::btree_map("[a-z]{1,6}", (inner, any::<bool>()), 0..5)
        .prop_map(|m| Spec::Obj(m.into_iter().map(|(k, (s, r))| (k, s, r)).collect()))
        .boxed()
}

/// An object spec nested up to `depth` levels below the top.
fn spec(depth: u32) -> BoxedStrategy<Spec> {
    let nested = leaf().prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            prop::option::of(inner.clone()).prop_map(|i| Spec::Arr(i.map(Box::new))),
            object_of(inner),
        ]
        .boxed()
    });
    object_of(nested.boxed())
}

fn to_schema(spec: &Spec) -> Value {
    match spec {
        Spec::Str(None) => json!({"type": "string"}),
        Spec::Str(Some(e)) => json!({"type": "string", "enum": e}),
        Spec::Num(None) => json!({"type": "number"}),
        Spec::Num(Some(e)) => json!({"type": "number", "enum": e}),
        Spec::Int => json!({"type": "integer"}),
        Spec::Bool => json!({"type": "boolean"}),
        Spec::Arr(None) => json!({"type": "array"}),
        Spec::Arr(Some(i)) => json!({"type": "array", "items": to_schema(i)}),
        Spec::Obj(props) => {
            let mut p = Map::new();
            let mut required = Vec::new();
            for (k, s, r) in props {
                p.insert(k.clone(), to_schema(s));
                if *r {
                    required.push(Value::from(k.as_str()));
                }
            }
            let mut o = Map::new();
            o.insert("type".into(), "object".into());
            o.insert("properties".into(), Value::Object(p));
            if !required.is_empty() {
                o.insert("required".into(), Value::Array(required));
            }
            Value::Object(o)
        }
    }
}

fn finite_f64() -> impl Strategy<Value = f64> {
    prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO
}

/// Any JSON value (finite numbers only: JSON has no others).
fn any_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        finite_f64().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((".{0,6}", inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Values that satisfy `spec`, with optional keys sometimes present and undeclared extras.
fn valid(spec: &Spec) -> BoxedStrategy<Value> {
    match spec {
        Spec::Str(None) => ".{0,8}".prop_map(Value::from).boxed(),
        Spec::Str(Some(e)) => prop::sample::select(e.clone())
            .prop_map(Value::from)
            .boxed(),
        Spec::Num(None) => prop_oneof![
            any::<i64>().prop_map(Value::from),
            finite_f64().prop_map(Value::from)
        ]
        .boxed(),
        Spec::Num(Some(e)) => prop::sample::select(e.clone())
            .prop_map(Value::from)
            .boxed(),
        Spec::Int => any::<i64>().prop_map(Value::from).boxed(),
        Spec::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Spec::Arr(None) => prop::collection::vec(any_json(), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        Spec::Arr(Some(i)) => prop::collection::vec(valid(i), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        Spec::Obj(props) => {
            let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = props
                .iter()
                .map(|(k, s, required)| {
                    let k = k.clone();
                    let present = if *required {
                        Just(true).boxed()
                    } else {
                        any::<bool>().boxed()
                    };
                    (present, valid(s))
                        .prop_map(move |(p, v)| p.then(|| (k.clone(), v)))
                        .boxed()
                })
                .collect();
            let declared: Vec<String> = props.iter().map(|(k, _, _)| k.clone()).collect();
            let extras = prop::collection::vec(("[A-Z]{1,4}", any_json()), 0..2);
            (fields, extras)
                .prop_map(move |(fields, extras)| {
                    let mut m: Map<String, Value> = fields.into_iter().flatten().collect();
                    for (k, v) in extras {
                        if !declared.contains(&k) {
                            m.insert(k, v);
                        }
                    }
                    Value::Object(m)
                })
                .boxed()
        }
    }
}

fn spec_and_valid(depth: u32) -> impl Strategy<Value = (Spec, Value)> {
    spec(depth).prop_flat_map(|s| {
        let v = valid(&s);
        (Just(s), v)
    })
}

/// One object of a value with the spec properties that describe it, and where it sits.
type Located<'a> = (String, &'a [(String, Spec, bool)], &'a Map<String, Value>);

/// Every object in `value` that `spec` describes.
fn objects<'a>(spec: &'a Spec, value: &'a Value, path: String, out: &mut Vec<Located<'a>>) {
    match (spec, value) {
        (Spec::Obj(props), Value::Object(map)) => {
            out.push((path.clone(), props, map));
            for (k, s, _) in props {
                if let Some(v) = map.get(k) {
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    objects(s, v, child, out);
                }
            }
        }
        (Spec::Arr(Some(item)), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                objects(item, v, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `value` with the key `key` removed from the object at `path` (as collected by `objects`).
fn without(value: &Value, path: &str, key: &str) -> Value {
    let mut v = value.clone();
    let mut cur = &mut v;
    if !path.is_empty() {
        for seg in path.split('.') {
            let (name, indices) = match seg.find('[') {
                Some(i) => (&seg[..i], &seg[i..]),
                None => (seg, ""),
            };
            cur = &mut cur[name];
            for idx in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
                cur = &mut cur[idx.parse::<usize>().expect("index")];
            }
        }
    }
    cur.as_object_mut().expect("an object").remove(key);
    v
}

fn validated(schema: Value) -> ToolDefinition {
    ToolDefinition::builder("p", "property tool")
        .validated_parameters(Json::new(schema).expect("shallow"))
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("")) })
        .build()
        .expect("a generated spec always builds")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn reg_75_the_required_set_at_every_level_is_exactly_the_marked_keys(
        (s, v) in spec_and_valid(2)
    ) {
        let schema = to_schema(&s);
        let mut found = Vec::new();
        objects(&s, &v, String::new(), &mut found);
        for (path, props, map) in found {
            for (k, _, required) in props {
                if !map.contains_key(k) {
                    continue;
                }
                let violations = validate(&schema, &without(&v, &path, k), "").expect("valid schema");
                let full = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if *required {
                    prop_assert_eq!(violations, vec![format!("missing required property \"{full}\"")]);
                } else {
                    prop_assert!(violations.is_empty(), "{:?}", violations);
                }
            }
        }
    }

    #[test]
    fn reg_76_building_a_tool_from_any_spec_never_fails(s in spec(3)) {
        let schema = to_schema(&s);
        prop_assert!(check_schema(&schema).is_ok());
        let def = validated(schema.clone());
        prop_assert_eq!(def.parameters().value(), &schema);
    }

    #[test]
    fn reg_77_validating_any_input_against_any_spec_never_fails(s in spec(3), v in any_json()) {
        let schema = to_schema(&s);
        prop_assert!(validate(&schema, &v, "").is_ok());
        let def = validated(schema);
        let _ = def.check_arguments(&Arguments::Json(Json::new(v).expect("shallow")));
    }

    #[test]
    fn reg_78_generated_valid_arguments_validate_clean((s, v) in spec_and_valid(3)) {
        let schema = to_schema(&s);
        prop_assert_eq!(validate(&schema, &v, "").expect("valid schema"), Vec::<String>::new());
        let def = validated(schema);
        prop_assert!(def.check_arguments(&Arguments::Json(Json::new(v).expect("shallow"))).is_ok());
    }

    #[test]
    fn reg_79_removing_a_required_key_is_a_violation_quoting_it((s, v) in spec_and_valid(3)) {
        let schema = to_schema(&s);
        let Spec::Obj(props) = &s else { unreachable!("top level is an object") };
        for (k, _, required) in props {
            if *required {
                let violations = validate(&schema, &without(&v, "", k), "").expect("valid schema");
                let quoted = format!("\"{k}\"");
                prop_assert!(violations.iter().any(|m| m.contains(&quoted)), "{:?}", violations);
            }
        }
    }

    #[test]
    fn reg_80_a_non_object_top_level_is_always_a_violation(
        s in spec(3),
        v in prop_oneof![
            ".{0,8}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            prop::collection::vec(any_json(), 0..3).prop_map(Value::Array),
        ]
    ) {
        let schema = to_schema(&s);
        prop_assert!(!validate(&schema, &v, "").expect("valid schema").is_empty());
        let def = validated(schema);
        let f = def.check_arguments(&Arguments::Json(Json::new(v).expect("shallow")));
        let failure = f.expect_err("refused");
        prop_assert_eq!(failure.code(), Some("INVALID_ARGS"));
    }

    #[test]
    fn json_text_round_trips(v in any_json()) {
        let json = Json::new(v.clone()).expect("shallow");
        let text = json.to_json_string();
        let back = Json::parse(&text).expect("our own text parses");
        prop_assert_eq!(back.value(), &v);
        prop_assert_eq!(back.to_json_string(), text);
        // Snapshots of the same value agree with it.
        prop_assert_eq!(Json::snapshot(&v).expect("finite"), json);
    }

    #[test]
    fn arguments_from_raw_parse_or_keep_verbatim(raw in prop_oneof![
        "[ \t\r\n]{0,4}",
        ".{0,24}",
        any_json().prop_map(|v| v.to_string()),
    ]) {
        let args = Arguments::from_raw(&raw);
        if raw.trim().is_empty() {
            prop_assert_eq!(args, Arguments::Json(Json::empty_object()));
        } else {
            match serde_json::from_str::<Value>(&raw) {
                Ok(v) => {
                    prop_assert_eq!(args.json().map(Json::value), Some(&v));
                }
                Err(_) => {
                    prop_assert_eq!(&args, &Arguments::Raw(raw.as_str().into()));
                    prop_assert_eq!(args.to_text(), raw);
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Abort the controlled node `n % controlled` with reason `r % 3`.
    Abort(usize, usize),
    /// Fuse nodes `a` and `b` (indices modulo the node count).
    Fuse(usize, usize),
    /// A child of node `n` with its own controller.
    Child(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<usize>(), 0..3usize).prop_map(|(n, r)| Op::Abort(n, r)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Fuse(a, b)),
        any::<usize>().prop_map(Op::Child),
    ]
}

fn reasons() -> [AbortReason; 3] {
    [
        AbortReason::Cancelled(CancelCause::User),
        AbortReason::Cancelled(CancelCause::Parent),
        AbortReason::Timeout(TimeoutReason::new("TOOL_TIMEOUT", 5)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn signal_fusion_keeps_the_first_reason_and_is_one_way(ops in prop::collection::vec(op(), 1..40)) {
        // Model: each node has a reason and children; a reason, once set, never changes and
        // flows only from a node to the nodes derived from it.
        let roots: Vec<AbortController> = (0..3).map(|_| AbortController::new()).collect();
        let mut signals: Vec<Signal> = roots.iter().map(AbortController::signal).collect();
        let mut controllers: Vec<(usize, AbortController)> = roots.into_iter().enumerate().collect();
        let mut model: Vec<Option<AbortReason>> = vec![None; 3];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); 3];

        fn fire(n: usize, r: &AbortReason, model: &mut [Option<AbortReason>], children: &[Vec<usize>]) {
            let mut stack = vec![n];
            while let Some(n) = stack.pop() {
                if model[n].is_none() {
                    model[n] = Some(r.clone());
                    stack.extend(children[n].iter().copied());
                }
            }
        }

        for op in ops {
            match op {
                Op::Abort(n, r) => {
                    let (node, ctl) = &controllers[n % controllers.len()];
                    let reason = &reasons()[r];
                    let first = ctl.abort(reason.clone());
                    prop_assert_eq!(first, model[*node].is_none());
                    fire(*node, reason, &mut model, &children);
                }
                Op::Fuse(a, b) => {
                    let (a, b) = (a % signals.len(), b % signals.len());
                    let fused = Signal::any(&signals[a], &signals[b]);
                    let id = signals.len();
                    signals.push(fused);
                    model.push(model[a].clone().or_else(|| model[b].clone()));
                    children.push(Vec::new());
                    children[a].push(id);
                    children[b].push(id);
                }
                Op::Child(n) => {
                    let n = n % signals.len();
                    let (child, ctl) = signals[n].child();
                    let id = signals.len();
                    signals.push(child);
                    model.push(model[n].clone());
                    children.push(Vec::new());
                    children[n].push(id);
                    controllers.push((id, ctl));
                }
            }
            for (i, s) in signals.iter().enumerate() {
                prop_assert_eq!(&s.reason(), &model[i], "node {}", i);
            }
        }
    }
}

/// Nesting depth by plain recursion (the values here are shallow).
fn naive_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(naive_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(naive_depth).max().unwrap_or(0),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn depth_of_counts_nesting_for_flat_and_nested_values(v in any_json()) {
        prop_assert_eq!(dsh_core::json::depth_of(&v), naive_depth(&v));
        prop_assert_eq!(Json::new(v.clone()).expect("shallow").depth(), naive_depth(&v));
    }
}
