//! What crosses from a program to the host must be lossless JSON (CODE-42): every
//! refusal, for a tool call's arguments and for the returned value, with the message each one
//! gives, proxies asked through their traps, and builtins the program replaced changing nothing.

use serde_json::json;

use super::support::*;

/// Each case's arguments, then the message of the call's rejection (or the tool's answer).
const CASES: &str = r#"
  const cases = [
    ["nan", () => ({value: NaN})],
    ["inf", () => ({value: [Infinity]})],
    ["minus-inf", () => ({a: {b: -Infinity}})],
    ["hole", () => ({value: [1, , 3]})],
    ["undef-elem", () => ({value: [undefined]})],
    ["undef-prop", () => ({value: 'kept', gone: undefined})],
    ["map", () => ({value: new Map()})],
    ["proto-to-json", () => ({value: new (class Stamp { toJSON() { return "via toJSON" } })()})],
    ["class", () => ({value: new (class Point { constructor() { this.x = 1 } })()})],
    ["null-proto", () => { const o = Object.create(null); o.value = 'np'; return o }],
    ["bigint", () => ({value: 10n})],
    ["function", () => ({value: function f() {}})],
    ["symbol", () => ({value: Symbol('s')})],
    ["boxed", () => ({value: new Number(1)})],
    ["to-json", () => ({value: {toJSON() { return 'from toJSON' }}})],
    ["proxy-plain", () => ({value: new Proxy({a: 1}, {})})],
    ["proxy-array", () => ({value: new Proxy([1, 2], {})})],
    ["proxy-proto-trap", () => ({value: new Proxy({}, {getPrototypeOf() { return Array.prototype }})})],
    ["proxy-proto-throws", () => ({value: new Proxy({}, {getPrototypeOf() { throw new Error('trap says no') }})})],
    ["proxy-fn", () => ({value: new Proxy(function () {}, {})})],
    ["tag-throws", () => { const o = Object.create({}); Object.defineProperty(o, Symbol.toStringTag, {get() { throw 1 }}); return {value: o} }],
    ["cycle", () => { const o = {}; o.self = o; return {value: o} }],
    ["trap-calls-a-tool", () => ({value: new Proxy({}, {getPrototypeOf() { tools.echo({value: 'inner'}); return null }})})],
  ];
  const out = {};
  for (const [name, make] of cases) {
    try { out[name] = await tools.echo(make()) } catch (e) { out[name] = e.message }
  }
"#;

fn expected() -> serde_json::Value {
    let refused = |what: &str| format!("tool arguments must be lossless JSON: {what}");
    json!({
        "nan": refused("non-finite number NaN is not lossless JSON"),
        "inf": refused("non-finite number Infinity is not lossless JSON"),
        "minus-inf": refused("non-finite number -Infinity is not lossless JSON"),
        "hole": refused("an undefined array element is not lossless JSON"),
        "undef-elem": refused("an undefined array element is not lossless JSON"),
        "undef-prop": "echo:kept",
        "map": refused("[object Map] is not lossless JSON"),
        "proto-to-json": "echo:via toJSON",
        "class": refused("[object Object] is not lossless JSON"),
        "null-proto": "echo:np",
        "bigint": refused("a BigInt is not lossless JSON"),
        "function": refused("a function is not lossless JSON"),
        "symbol": refused("a symbol is not lossless JSON"),
        "boxed": refused("[object Number] is not lossless JSON"),
        "to-json": "echo:from toJSON",
        "proxy-plain": "echo:{\"a\":1}",
        "proxy-array": "echo:[1,2]",
        "proxy-proto-trap": refused("[object Object] is not lossless JSON"),
        "proxy-proto-throws": refused("trap says no"),
        "proxy-fn": refused("a function is not lossless JSON"),
        "tag-throws": refused("an object with a prototype is not lossless JSON"),
        "cycle": refused("circular reference"),
        "trap-calls-a-tool": "echo:{}",
    })
}

/// Runs the cases after `before` (program text) and checks every answer.
async fn assert_cases_after(before: &str) {
    let o = run_with(
        &format!("{before} {CASES} return out"),
        &["echo"],
        echo_host(),
        fast_limits(),
    )
    .await;
    assert_eq!(value(&o), expected());
}

#[tokio::test]
async fn code_42_each_argument_json_would_change_is_refused_with_what_it_is() {
    assert_cases_after("").await;
}

#[tokio::test]
async fn code_42_the_check_holds_after_the_program_replaced_the_builtins_it_uses() {
    assert_cases_after(
        "Object.getPrototypeOf = () => null; Array.isArray = () => true; \
         Object.prototype.toString = () => 'forged'; Number.isFinite = () => true;",
    )
    .await;
}

#[tokio::test]
async fn a_returned_value_json_would_change_is_an_invalid_output() {
    for (program, what) in [
        (
            "return {n: NaN}",
            "non-finite number NaN is not lossless JSON",
        ),
        (
            "return [undefined]",
            "an undefined array element is not lossless JSON",
        ),
        ("return new Set()", "[object Set] is not lossless JSON"),
        ("return {f: () => 1}", "a function is not lossless JSON"),
    ] {
        let o = run_plain(program).await;
        let e = o.error.expect(program);
        assert_eq!(
            e.kind,
            dsh_code_mode::CodeErrorKind::InvalidOutput,
            "{program}"
        );
        assert_eq!(
            e.message,
            format!("the returned value is not lossless JSON: {what}"),
            "{program}"
        );
    }
    let o = run_plain("return {kept: [1, 'two', null, {three: 3}], gone: undefined}").await;
    assert_eq!(value(&o), json!({"kept": [1, "two", null, {"three": 3}]}));
}

/// Arguments of plain data are read by the host without their text (engine/plain.rs); any
/// other value is written by `JSON.stringify`. Either way the program's code in them runs as
/// `JSON.stringify` runs it, once: the plain read never runs a getter or a trap first.
#[tokio::test]
async fn code_42_getters_traps_and_to_json_in_arguments_run_once() {
    let host = fn_host(|_name, args| Ok(args.clone()));
    let o = run_with(
        "const runs = {get: 0, keys: 0, toJSON: 0}; \
         const sent = [ \
           {plain: [1, 'two', null, {three: 3.5}]}, \
           {get value() { runs.get++; return 'got' }}, \
           new Proxy({value: 'p'}, {ownKeys(t) { runs.keys++; return Reflect.ownKeys(t) }}), \
           {value: {toJSON() { runs.toJSON++; return 'j' }}}, \
         ]; \
         for (const args of sent) await tools.id(args); \
         return runs",
        &["id"],
        host.clone(),
        fast_limits(),
    )
    .await;
    assert_eq!(value(&o), json!({"get": 1, "keys": 1, "toJSON": 1}));
    let calls = host.calls.lock();
    let args: Vec<_> = calls.iter().map(|(_, a)| a.value().clone()).collect();
    assert_eq!(
        args,
        vec![
            json!({"plain": [1, "two", null, {"three": 3.5}]}),
            json!({"value": "got"}),
            json!({"value": "p"}),
            json!({"value": "j"}),
        ]
    );
}
