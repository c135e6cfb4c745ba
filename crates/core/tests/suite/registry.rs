//! REG-01..14: registration, lookup, schema projection and disposal handles.

use std::sync::Arc;

use dsh_core::{CoreError, Json, ToolDefinition, ToolOutput, ToolRegistry, text_content};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::fixtures::{echo, keep, ran};

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn reg_01_schemas_project_name_description_parameters_only() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    let schemas = reg.schemas(None);
    assert_eq!(schemas.len(), 1);
    let projected = serde_json::to_value(&schemas).expect("serializes");
    assert_eq!(
        projected,
        json!([{
            "name": "echo",
            "description": "Echo the text back",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}
        }])
    );
    assert!(projected[0].get("execute").is_none());
    assert_eq!(reg.names(None), vec!["echo"]);
}

#[test]
fn reg_02_projection_is_an_allowlist_no_host_callback_reaches_the_model() {
    let reg = ToolRegistry::new();
    let def = ToolDefinition::builder("rich", "has every callback")
        .output(ToolOutput::string().with_presentation_meta(|v| Ok(Some(v.clone()))))
        .execute(|_ctx| async { Ok(Json::string("x")) })
        .finalize_content(|_exec, _res| Ok(Some(text_content("final"))))
        .classify(|_| true)
        .permission_subject(|_| Some("subject".into()))
        .timeout_ms_from_config(1000.0)
        .build()
        .expect("builds");
    keep(&reg, def);
    let projected = serde_json::to_value(&reg.schemas(None)[0]).expect("serializes");
    assert_eq!(keys(&projected), vec!["description", "name", "parameters"]);
}

#[test]
fn reg_03_timeout_budget_is_never_projected() {
    let reg = ToolRegistry::new();
    let def = ToolDefinition::builder("slow", "budgeted")
        .output(ToolOutput::string())
        .execute(|_ctx| async { Ok(Json::string("x")) })
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("builds");
    assert_eq!(def.timeout_ms(), Some(5000));
    keep(&reg, def);
    let text = serde_json::to_string(&reg.schemas(None)).expect("serializes");
    assert!(!text.contains("timeout"), "{text}");
    assert!(!text.contains("5000"), "{text}");
}

#[test]
fn reg_04_a_definition_without_output_is_refused() {
    // Rust analogue: `build()` refuses a definition with no output contract (definitions can be
    // assembled dynamically, e.g. by an MCP adapter, so the check stays at run time).
    let err = ToolDefinition::builder("raw", "no output")
        .execute(|_ctx| async { Ok(Json::null()) })
        .build()
        .expect_err("must fail");
    assert_eq!(err, CoreError::MissingOutput);
    assert!(
        err.to_string()
            .contains("must declare output { schema, render, presentationMeta? }"),
        "{err}"
    );
    let err = ToolDefinition::builder("raw", "no body")
        .output(ToolOutput::string())
        .build()
        .expect_err("must fail");
    assert_eq!(err, CoreError::MissingBody);
}

#[test]
fn reg_05_callers_get_a_copy_never_registry_internals() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    let mut first = reg.schemas(None);
    // Everything a caller can reach is either owned by the caller or frozen: rewrite it all.
    first[0].description = Arc::from("mutated");
    first[0].parameters = Json::from_shallow(json!({"type": "object", "properties": {"x": {}}}));
    first.clear();
    let second = serde_json::to_value(reg.schemas(None)).expect("serializes");
    assert_eq!(second[0]["description"], "Echo the text back");
    assert_eq!(
        second[0]["parameters"],
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    );
}

#[test]
fn reg_08_zero_or_infinite_budget_is_refused() {
    for bad in [0.0, f64::INFINITY, f64::NAN, -1.0] {
        let err = ToolDefinition::builder("t", "d")
            .output(ToolOutput::string())
            .execute(|_ctx| async { Ok(Json::null()) })
            .timeout_ms_from_config(bad)
            .build()
            .expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "timeoutMs must be a positive finite number"
        );
    }
    // Overriding the budget of a built definition follows the same rule.
    let err = echo().with_timeout_ms(Some(0)).expect_err("must fail");
    assert_eq!(
        err.to_string(),
        "timeoutMs must be a positive finite number"
    );
}

#[test]
fn reg_09_duplicate_registration_fails_and_a_plugin_removes_its_own_tool() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    let err = reg.register(echo()).expect_err("duplicate");
    assert!(err.to_string().contains("already registered"), "{err}");
    // Plugins live outside dsh-core; their Rust analogue here is a value owning the handles of
    // what it registered, whose drop removes them.
    struct Plugin {
        _handles: Vec<dsh_core::Registration>,
    }
    let plugin = Plugin {
        _handles: vec![reg.register(ran("scoped")).expect("registers")],
    };
    assert_eq!(reg.names(None), vec!["echo", "scoped"]);
    drop(plugin);
    assert_eq!(reg.names(None), vec!["echo"]);
}

#[test]
fn reg_10_register_returns_a_disposer_and_schemas_keep_registration_order() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    let handle = reg.register(ran("disposable")).expect("registers");
    assert_eq!(reg.names(None), vec!["echo", "disposable"]);
    handle.dispose();
    assert_eq!(reg.names(None), vec!["echo"]);
    assert!(reg.get("disposable", None).is_none());
}

#[test]
fn reg_10_order_is_registration_order_not_name_order() {
    let reg = ToolRegistry::new();
    for n in ["zulu", "alpha", "mike"] {
        keep(&reg, ran(n));
    }
    assert_eq!(reg.names(None), vec!["zulu", "alpha", "mike"]);
}

#[test]
fn reg_11_a_failed_registration_leaves_no_trace_and_the_name_stays_usable() {
    // Rust analogue: there are no `tools/change` listeners in dsh-core; what must hold is that a
    // registration that fails is rolled back entirely.
    let reg = ToolRegistry::new();
    let before = reg.generation();
    let err = reg
        .register(
            ToolDefinition::builder("", "nameless")
                .output(ToolOutput::string())
                .execute(|_ctx| async { Ok(Json::null()) })
                .build()
                .expect("builds"),
        )
        .expect_err("empty name");
    assert_eq!(err, CoreError::EmptyName);
    assert!(reg.schemas(None).is_empty());

    let holder = reg.register(echo()).expect("registers");
    assert!(reg.register(echo()).is_err());
    assert_eq!(
        reg.names(None),
        vec!["echo"],
        "the failed duplicate changed nothing"
    );
    holder.dispose();
    assert!(reg.get("echo", None).is_none());
    assert!(reg.schemas(None).is_empty());

    let again = reg.register(echo()).expect("the name is free again");
    assert_eq!(reg.names(None), vec!["echo"]);
    assert!(reg.generation() > before);
    again.dispose();
    assert!(reg.get("echo", None).is_none());
}

#[test]
fn reg_11_a_stale_handle_never_removes_a_later_registration_of_the_same_name() {
    let reg = ToolRegistry::new();
    let first = reg.register(echo()).expect("registers");
    let scope = dsh_core::AgentId::new("a");
    let scope_handle = reg.declare_scope(&scope, None);
    let scoped = reg.register_scoped(&scope, ran("mine")).expect("registers");
    scope_handle.dispose();
    let _scope_again = reg.declare_scope(&scope, None);
    let _mine_again = reg.register_scoped(&scope, ran("mine")).expect("registers");
    // Disposing the first `mine` handle after its scope was recreated must not remove the new one.
    scoped.dispose();
    assert!(reg.get("mine", Some(&scope)).is_some());
    first.dispose();
    assert!(reg.get("echo", None).is_none());
}

#[test]
fn reg_12_registration_guards_are_released_in_lifo_order() {
    // Rust analogue of a plugin's resource scope: guards dropped in reverse order of acquisition,
    // so a teardown step acquired after a registration still sees the tool.
    struct Step {
        label: &'static str,
        reg: ToolRegistry,
        log: Arc<Mutex<Vec<String>>>,
    }
    impl Drop for Step {
        fn drop(&mut self) {
            let seen = self.reg.get("echo", None).is_some();
            self.log.lock().push(format!("{}:{seen}", self.label));
        }
    }
    let reg = ToolRegistry::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    {
        let _marker = Step {
            label: "final-marker",
            reg: reg.clone(),
            log: log.clone(),
        };
        let _registration = reg.register(echo()).expect("registers");
        log.lock().push("registered".into());
        let _teardown = Step {
            label: "teardown-step",
            reg: reg.clone(),
            log: log.clone(),
        };
    }
    assert_eq!(
        *log.lock(),
        vec!["registered", "teardown-step:true", "final-marker:false"]
    );
    assert!(reg.get("echo", None).is_none());
}

#[test]
fn reg_13_get_returns_the_registered_definition() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    let def = reg.get("echo", None).expect("found");
    assert_eq!(def.name(), "echo");
    assert_eq!(def.description(), "Echo the text back");
}

#[test]
fn reg_14_get_of_an_unregistered_name_is_none() {
    let reg = ToolRegistry::new();
    keep(&reg, echo());
    assert!(reg.get("nope", None).is_none());
}

#[test]
fn registry_handles_outliving_the_registry_are_harmless() {
    let reg = ToolRegistry::new();
    let handle = reg.register(echo()).expect("registers");
    drop(reg);
    handle.dispose();
}

#[test]
fn run_code_is_reserved_for_the_code_mode_transport() {
    let reg = ToolRegistry::new();
    let err = reg.register(ran("run_code")).expect_err("reserved");
    assert_eq!(
        err.to_string(),
        "tool name \"run_code\" is reserved for the Code Mode presentation transport"
    );
    let agent = dsh_core::AgentId::new("a");
    assert!(reg.register_scoped(&agent, ran("run_code")).is_err());
    assert!(reg.schemas(None).is_empty());
    reg.register_reserved(ran("run_code"))
        .expect("transport")
        .keep();
    assert_eq!(reg.names(None), vec!["run_code"]);
}
