//! Shared helpers of the Code Mode suite: small hosts and a one-call runner.

use std::sync::Arc;
use std::time::Duration;

use dsh_code_mode::{Bindings, CodeOutcome, CodeRun, Host, Limits, ToolCallError, run_quickjs};
use dsh_core::{Json, Signal};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;

/// A host answering with a closure; records every call.
pub struct FnHost<F> {
    pub f: F,
    pub calls: Mutex<Vec<(String, Json)>>,
}

impl<F> Host for FnHost<F>
where
    F: Fn(&str, &Json) -> Result<Json, ToolCallError> + Send + Sync + 'static,
{
    fn call(&self, name: &str, args: Json) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        let r = (self.f)(name, &args);
        self.calls.lock().push((name.to_owned(), args));
        async move { r }.boxed()
    }
}

pub fn fn_host<F>(f: F) -> Arc<FnHost<F>>
where
    F: Fn(&str, &Json) -> Result<Json, ToolCallError> + Send + Sync + 'static,
{
    Arc::new(FnHost {
        f,
        calls: Mutex::new(Vec::new()),
    })
}

/// A host answering from a plain function.
pub type PlainHost = FnHost<fn(&str, &Json) -> Result<Json, ToolCallError>>;

fn echo_answer(name: &str, args: &Json) -> Result<Json, ToolCallError> {
    let v = args
        .value()
        .get("value")
        .map(|v| match v.as_str() {
            Some(s) => s.to_owned(),
            None => v.to_string(),
        })
        .unwrap_or_default();
    Ok(Json::string(format!("{name}:{v}")))
}

/// `echo({value})` answers `echo:<value>`.
pub fn echo_host() -> Arc<PlainHost> {
    fn_host(echo_answer as fn(&str, &Json) -> Result<Json, ToolCallError>)
}

/// Small limits that keep failing tests fast.
pub fn fast_limits() -> Limits {
    Limits {
        wall_time: Duration::from_millis(1500),
        ..Limits::default()
    }
}

pub async fn run_with(
    program: &str,
    names: &[&str],
    host: Arc<dyn Host>,
    limits: Limits,
) -> CodeOutcome {
    let bindings = Bindings::new(names.iter().map(|n| Arc::from(*n)), host);
    run_quickjs(CodeRun {
        program: program.to_owned(),
        bindings,
        signal: Signal::never(),
        limits,
    })
    .await
}

pub async fn run_plain(program: &str) -> CodeOutcome {
    run_with(program, &[], echo_host(), fast_limits()).await
}
