//! `dsh tools` (issue 17, item 7): the definitions a model would be sent, in the OpenAI,
//! Anthropic and MCP shapes, under the policy, preset, settings and mode `dsh run` would use.

use serde_json::Value;

use super::support::*;

fn tools_json(args: &[&str]) -> Value {
    let mut all = vec!["tools"];
    all.extend(args);
    let out = dsh_run(&all);
    assert_eq!(out.code, 0, "{}", out.both());
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

fn names(list: &Value, key: &[&str]) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut v = t;
            for k in key {
                v = &v[*k];
            }
            v.as_str().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn issue17_7_tools_prints_each_shape() {
    let t = tmp();
    let ws = s(t.path());
    let openai = tools_json(&["--workspace", ws]);
    assert_eq!(
        names(&openai, &["function", "name"]),
        ["read", "write", "edit", "glob", "grep", "bash"]
    );
    for tool in openai.as_array().unwrap() {
        assert_eq!(tool["type"], "function");
        assert_eq!(tool["function"]["parameters"]["type"], "object", "{tool}");
        assert!(tool["function"]["description"].as_str().unwrap().len() > 10);
    }
    let anthropic = tools_json(&["--workspace", ws, "--format", "anthropic"]);
    assert_eq!(
        names(&anthropic, &["name"]),
        names(&openai, &["function", "name"])
    );
    for (a, o) in anthropic
        .as_array()
        .unwrap()
        .iter()
        .zip(openai.as_array().unwrap())
    {
        assert_eq!(a["input_schema"], o["function"]["parameters"]);
        assert_eq!(a["description"], o["function"]["description"]);
    }
    let mcp = tools_json(&["--workspace", ws, "--format", "mcp"]);
    assert_eq!(
        names(&mcp["tools"], &["name"]),
        names(&openai, &["function", "name"])
    );
    assert_eq!(
        mcp["tools"][0]["inputSchema"],
        openai[0]["function"]["parameters"]
    );
    // Nothing is written: no session, no settings directory.
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
}

#[test]
fn issue17_7_tools_follows_the_mode_and_demo_tools() {
    let t = tmp();
    let ws = s(t.path());
    let code = tools_json(&["--workspace", ws, "--mode", "code"]);
    assert_eq!(names(&code, &["function", "name"]), ["run_code"]);
    let both = tools_json(&["--workspace", ws, "--mode", "both", "--demo-tools"]);
    let both = names(&both, &["function", "name"]);
    for n in ["read", "bash", "echo", "sleep", "fail", "run_code"] {
        assert!(both.iter().any(|b| b == n), "{n} missing from {both:?}");
    }
    let policy = t.path().join("p.toml");
    std::fs::write(&policy, "mode = \"code\"\n").unwrap();
    let code = tools_json(&["--workspace", ws, "--policy", s(&policy)]);
    assert_eq!(names(&code, &["function", "name"]), ["run_code"]);
    // The prompt text that goes with them: the SDK under code, nothing under native.
    let system = dsh_run(&["tools", "--workspace", ws, "--mode", "code", "--system"]);
    assert_eq!(system.code, 0, "{}", system.both());
    assert!(
        system.stdout.contains("declare const tools"),
        "{}",
        system.stdout
    );
    assert!(system.stdout.contains("read(args: {"), "{}", system.stdout);
    let native = dsh_run(&["tools", "--workspace", ws, "--system"]);
    assert_eq!(native.code, 0, "{}", native.both());
    assert_eq!(native.stdout.trim(), "");
}

#[test]
fn issue17_7_tools_leaves_out_what_the_policy_always_denies() {
    let t = tmp();
    let ws = s(t.path());
    let policy = t.path().join("p.toml");
    std::fs::write(
        &policy,
        "[permissions]\ndeny = [\"bash\", \"write(secrets/*)\"]\n",
    )
    .unwrap();
    let listed = tools_json(&["--workspace", ws, "--policy", s(&policy)]);
    assert_eq!(
        names(&listed, &["function", "name"]),
        ["read", "write", "edit", "glob", "grep"]
    );
    std::fs::write(
        &policy,
        "[permissions]\nallow = [\"read\", \"grep(src/*)\"]\nask = [\"edit\"]\ndefault = \"deny\"\n",
    )
    .unwrap();
    let listed = tools_json(&["--workspace", ws, "--policy", s(&policy), "--format", "mcp"]);
    assert_eq!(names(&listed["tools"], &["name"]), ["read", "edit", "grep"]);
}

#[test]
fn issue17_7_tools_refuses_bad_options_like_run() {
    let t = tmp();
    let ws = s(t.path());
    let policy = t.path().join("p.toml");
    std::fs::write(&policy, "mode = \"sideways\"\n").unwrap();
    let out = dsh_run(&["tools", "--workspace", ws, "--policy", s(&policy)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("line 1"), "{}", out.both());
    let out = dsh_run(&["tools", "--workspace", ws, "--format", "yaml"]);
    assert_eq!(out.code, 2, "{}", out.both());
    let settings = t.path().join("settings.json");
    std::fs::write(&settings, "{not json").unwrap();
    let out = dsh_run(&["tools", "--workspace", ws, "--settings", s(&settings)]);
    assert_eq!(out.code, 2, "{}", out.both());
    assert!(out.stderr.contains("settings.json"), "{}", out.both());
}
