//! `ToolDefinition`: a tool's name, description, parameter schema, output contract
//! (`{schema, render, presentation_meta?}`), body, optional `finalize_content`, `timeout_ms`,
//! concurrency classifier and permission subject (spec D3, F3, S2).
//!
//! Guarantees: a definition is immutable once built; `timeout_ms` is positive; the body sees the
//! execution, the fused signal and a sink for deferred contexts, never anything to mutate.

use crate::execution::AgentId;
use crate::subject::PermissionSubject;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::content::{Content, ContentBlock};
use crate::context::ContextMessage;
use crate::error::CoreError;
use crate::execution::{Arguments, ExecutionToken, ToolExecution};
use crate::failure::Failure;
use crate::json::Json;
use crate::result::ToolResult;
use crate::signal::Signal;
use crate::validate;

/// What a body's effects on the world outside its value are: contexts it deferred, and whether it
/// asked to conclude the turn.
#[derive(Default)]
pub struct BodyEffects {
    deferred: Mutex<Vec<ContextMessage>>,
    /// Set once a context was deferred (after it is in `deferred`): a body that deferred none,
    /// the usual one, is answered without taking the lock.
    any_deferred: AtomicBool,
    concludes: AtomicBool,
}

impl BodyEffects {
    /// Contexts deferred so far, in order.
    pub fn take_deferred(&self) -> Vec<ContextMessage> {
        if !self.any_deferred.load(Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.deferred.lock())
    }
    /// Whether the body concluded the turn.
    pub fn concluded(&self) -> bool {
        self.concludes.load(Ordering::Acquire)
    }
}

/// What a tool body receives.
#[derive(Clone)]
pub struct ToolContext {
    exec: Arc<ToolExecution>,
    signal: Signal,
    effects: Arc<BodyEffects>,
}

impl ToolContext {
    /// A context for `exec` whose body observes `signal`.
    pub fn new(exec: Arc<ToolExecution>, signal: Signal, effects: Arc<BodyEffects>) -> ToolContext {
        ToolContext {
            exec,
            signal,
            effects,
        }
    }
    /// The execution.
    pub fn exec(&self) -> &Arc<ToolExecution> {
        &self.exec
    }
    /// The arguments.
    pub fn arguments(&self) -> &Arguments {
        self.exec.arguments()
    }
    /// The signal the body must honour (caller's fused with any wrapper's).
    pub fn signal(&self) -> &Signal {
        &self.signal
    }
    /// Defers a context onto this call's result (delivered after the batch's results).
    pub fn defer_context(&self, ctx: ContextMessage) {
        self.effects.deferred.lock().push(ctx);
        self.effects.any_deferred.store(true, Ordering::Release);
    }
    /// Asks the loop to end the turn after this batch if the call succeeds.
    pub fn conclude_turn(&self) {
        self.effects.concludes.store(true, Ordering::Release);
    }
}

/// A tool body.
#[async_trait]
pub trait ToolBody: Send + Sync + 'static {
    /// Runs the tool; returns its canonical value or a failure.
    async fn execute(&self, ctx: ToolContext) -> Result<Json, Failure>;
}

struct FnBody<F>(F);

#[async_trait]
impl<F, Fut> ToolBody for FnBody<F>
where
    F: Fn(ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Json, Failure>> + Send + 'static,
{
    async fn execute(&self, ctx: ToolContext) -> Result<Json, Failure> {
        (self.0)(ctx).await
    }
}

/// Renders a canonical value into content blocks (pure).
pub type RenderFn = Arc<dyn Fn(&Json) -> Result<Content, Failure> + Send + Sync>;
/// Projects presentation metadata from a canonical value (pure).
pub type MetaFn = Arc<dyn Fn(&Json) -> Result<Option<Json>, Failure> + Send + Sync>;
/// The last, pure, content-only step on every outcome; `None` keeps the content.
pub type FinalizeFn =
    Arc<dyn Fn(&ToolExecution, &ToolResult) -> Result<Option<Content>, Failure> + Send + Sync>;
/// Reads the permission subject (a command, a path) from a call's arguments and agent.
pub type SubjectFn =
    Arc<dyn Fn(&Value, Option<&AgentId>) -> Option<PermissionSubject> + Send + Sync>;
/// Per-call concurrency classifier.
pub type ClassifyFn = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// The output contract every tool declares.
#[derive(Clone)]
pub struct ToolOutput {
    schema: Json,
    /// What the schema asks of a value when it asks only for a type (decided once).
    precheck: validate::Precheck,
    render: RenderFn,
    presentation_meta: Option<MetaFn>,
}

impl ToolOutput {
    /// An output with a schema and a render function.
    pub fn new(
        schema: Json,
        render: impl Fn(&Json) -> Result<Content, Failure> + Send + Sync + 'static,
    ) -> ToolOutput {
        ToolOutput {
            precheck: validate::Precheck::of(schema.value()),
            schema,
            render: Arc::new(render),
            presentation_meta: None,
        }
    }

    /// A string value rendered as one text block.
    pub fn string() -> ToolOutput {
        ToolOutput::new(Json::from_shallow(json!({"type": "string"})), |v| {
            Ok(Arc::from([ContentBlock::text(
                v.as_str().unwrap_or_default(),
            )]))
        })
    }

    /// Any JSON value: strings render raw, everything else as pretty JSON.
    pub fn json() -> ToolOutput {
        ToolOutput::new(Json::empty_object(), |v| {
            Ok(Arc::from([ContentBlock::text(render_value_text(v))]))
        })
    }

    /// A value that is itself an array of content blocks, rendered as those blocks.
    pub fn content_blocks() -> ToolOutput {
        ToolOutput::new(Json::from_shallow(json!({"type": "array"})), |v| {
            let items = match v.to_value() {
                Value::Array(items) => items,
                other => {
                    crate::json::dismantle(other);
                    Vec::new()
                }
            };
            let blocks: Result<Vec<ContentBlock>, _> =
                items.into_iter().map(ContentBlock::from_value).collect();
            blocks
                .map(Arc::from)
                .map_err(|e| Failure::new(e.to_string()))
        })
    }

    /// Adds a presentation-meta projector.
    pub fn with_presentation_meta(
        mut self,
        f: impl Fn(&Json) -> Result<Option<Json>, Failure> + Send + Sync + 'static,
    ) -> ToolOutput {
        self.presentation_meta = Some(Arc::new(f));
        self
    }

    /// The output schema.
    pub fn schema(&self) -> &Json {
        &self.schema
    }
}

/// Nesting beyond which [`render_value_text`] renders compact JSON: pretty text grows with the
/// square of the depth (every line is indented by its level).
pub const PRETTY_MAX_DEPTH: usize = 64;

/// Text for a value: a string raw, anything else pretty JSON with two-space indentation (compact
/// for values nested deeper than [`PRETTY_MAX_DEPTH`]).
pub fn render_value_text(v: &Json) -> String {
    match v.value() {
        Value::String(s) => s.clone(),
        _ if v.depth() > PRETTY_MAX_DEPTH => v.to_json_string(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// How a tool's calls are classified for scheduling (spec S2).
#[derive(Clone)]
pub enum Concurrency {
    /// Every call is exclusive (the default).
    Exclusive,
    /// Every call is parallel-safe.
    Parallel,
    /// Decided per call from its arguments; only an exact `true` is parallel.
    Classify(ClassifyFn),
}

/// A tool.
#[derive(Clone)]
pub struct ToolDefinition {
    pub(crate) name: Arc<str>,
    pub(crate) description: Arc<str>,
    pub(crate) parameters: Json,
    /// What `parameters` asks of arguments when it asks only for a type (decided once).
    pub(crate) parameters_precheck: validate::Precheck,
    pub(crate) validate_arguments: bool,
    pub(crate) output: ToolOutput,
    pub(crate) body: Arc<dyn ToolBody>,
    pub(crate) finalize_content: Option<FinalizeFn>,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) concurrency: Concurrency,
    pub(crate) permission_subject: Option<SubjectFn>,
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// Starts a definition.
    pub fn builder(name: &str, description: &str) -> ToolBuilder {
        ToolBuilder {
            name: Arc::from(name),
            description: Arc::from(description),
            parameters: Json::from_shallow(json!({"type": "object", "properties": {}})),
            validate_arguments: false,
            output: None,
            body: None,
            finalize_content: None,
            timeout_ms: None,
            concurrency: Concurrency::Exclusive,
            permission_subject: None,
            lossy_parameters: false,
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The description.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The parameter schema.
    pub fn parameters(&self) -> &Json {
        &self.parameters
    }
    /// The output contract.
    pub fn output(&self) -> &ToolOutput {
        &self.output
    }
    /// The budget, if declared.
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms
    }
    /// The finalizer, if declared.
    pub fn finalize_content(&self) -> Option<&FinalizeFn> {
        self.finalize_content.as_ref()
    }
    /// The body.
    pub fn body(&self) -> &Arc<dyn ToolBody> {
        &self.body
    }
    /// Whether the registry validates arguments against `parameters` before the body runs.
    pub fn validates_arguments(&self) -> bool {
        self.validate_arguments
    }

    /// The permission subject of a call as shown to a person (the command of a shell tool, the
    /// path of a file tool); see [`ToolDefinition::permission_subjects`].
    pub fn permission_subject(&self, args: &Arguments) -> Option<String> {
        self.permission_subjects(args, None).map(|s| s.shown())
    }

    /// The permission subject of a call by `agent`, with its parts and spellings; `None` when
    /// the tool declares none or cannot read it from these arguments.
    pub fn permission_subjects(
        &self,
        args: &Arguments,
        agent: Option<&AgentId>,
    ) -> Option<PermissionSubject> {
        let f = self.permission_subject.as_ref()?;
        let json = args.json()?;
        crate::contained::call(|| f(json.value(), agent))
            .ok()
            .flatten()
    }

    /// A copy with another budget (configuration overrides); `None` removes it.
    pub fn with_timeout_ms(&self, ms: Option<u64>) -> Result<ToolDefinition, CoreError> {
        let ms = match ms {
            Some(0) => return Err(CoreError::Timeout),
            Some(ms) => Some(budget_within_max(ms)?),
            None => None,
        };
        let mut d = self.clone();
        d.timeout_ms = ms;
        Ok(d)
    }

    /// Whether this call may run in parallel: only an exact `true` from the classifier, and
    /// only for arguments that parse and (for validating tools) pass the schema. A panicking
    /// classifier means exclusive.
    pub fn is_concurrency_safe(&self, args: &Arguments) -> bool {
        let Some(json) = args.json() else {
            return false;
        };
        match &self.concurrency {
            Concurrency::Exclusive => false,
            Concurrency::Parallel => !self.validate_arguments || self.check_arguments(args).is_ok(),
            Concurrency::Classify(f) => {
                if self.validate_arguments && self.check_arguments(args).is_err() {
                    return false;
                }
                crate::contained::call(|| f(json.value())).unwrap_or(false)
            }
        }
    }

    /// Validates arguments against the parameter schema when the tool asks for it
    /// (`INVALID_ARGS` with the reference's messages). Arguments must be a JSON object whatever
    /// the schema says; raw text that did not parse is refused with the reason it did not.
    pub fn check_arguments(&self, args: &Arguments) -> Result<(), Failure> {
        if !self.validate_arguments {
            return Ok(());
        }
        match args {
            Arguments::Raw(_) => {
                let violation = match args.parse_error() {
                    Some(e) => format!("arguments must be a JSON object: {e}"),
                    None => "arguments must be a JSON object".to_owned(),
                };
                Err(Failure::invalid_args(&[violation]))
            }
            Arguments::Json(j) if !j.value().is_object() => Err(Failure::invalid_args(&[
                "arguments must be an object".to_owned(),
            ])),
            Arguments::Json(j) if self.parameters_precheck.passes(j.value()) => Ok(()),
            Arguments::Json(j) => {
                match validate::validate(self.parameters.value(), j.value(), "") {
                    Ok(v) if v.is_empty() => Ok(()),
                    Ok(v) => Err(Failure::invalid_args(&v)),
                    Err(e) => Err(Failure::new(e.to_string())),
                }
            }
        }
    }

    /// Validates a canonical value against the output schema, renders it and projects its meta:
    /// the registry's output stage (spec D3). Any failure is `INVALID_TOOL_OUTPUT`.
    pub fn render_success(
        &self,
        token: ExecutionToken,
        value: Json,
        with_meta: bool,
    ) -> Result<ToolResult, Failure> {
        let name = &*self.name;
        if !self.output.precheck.passes(value.value()) {
            match validate::validate(self.output.schema.value(), value.value(), "value") {
                Ok(v) if v.is_empty() => {}
                Ok(v) => {
                    return Err(Failure::invalid_output(
                        name,
                        format!("returned invalid output: {}", v.join("; ")),
                    ));
                }
                Err(e) => return Err(Failure::invalid_output(name, e)),
            }
        }
        let render = self.output.render.clone();
        let content = crate::contained::call(|| render(&value))
            .map_err(|p| Failure::from_panic("render", &*p))
            .and_then(|r| r)
            .map_err(|e| {
                Failure::invalid_output(name, format!("render failed: {}", e.message()))
            })?;
        let meta = match (&self.output.presentation_meta, with_meta) {
            (Some(f), true) => crate::contained::call(|| f(&value))
                .map_err(|p| Failure::from_panic("presentationMeta", &*p))
                .and_then(|r| r)
                .map_err(|e| {
                    Failure::invalid_output(
                        name,
                        format!("presentationMeta failed: {}", e.message()),
                    )
                })?,
            _ => None,
        };
        Ok(ToolResult::rendered(token, value, content, meta))
    }

    /// Runs the body with panics caught: a panic is a failure saying the tool panicked.
    pub async fn run_body(&self, ctx: ToolContext) -> Result<Json, Failure> {
        crate::contained::future(std::pin::pin!(self.body.execute(ctx)))
            .await
            .unwrap_or_else(|p| Err(Failure::from_panic(&format!("tool \"{}\"", self.name), &*p)))
    }
}

/// A budget no timer can arm is refused when the tool is defined, not when it is first called.
fn budget_within_max(ms: u64) -> Result<u64, CoreError> {
    if ms > crate::deadline::MAX_TIMEOUT_MS {
        return Err(CoreError::Deadline(
            crate::deadline::DeadlineError::TooLarge {
                label: "timeoutMs".into(),
            },
        ));
    }
    Ok(ms)
}

/// Builds a [`ToolDefinition`].
pub struct ToolBuilder {
    name: Arc<str>,
    description: Arc<str>,
    parameters: Json,
    validate_arguments: bool,
    output: Option<ToolOutput>,
    body: Option<Arc<dyn ToolBody>>,
    finalize_content: Option<FinalizeFn>,
    timeout_ms: Option<f64>,
    concurrency: Concurrency,
    permission_subject: Option<SubjectFn>,
    lossy_parameters: bool,
}

impl ToolBuilder {
    /// The name the tool is being built with.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }
    /// A raw parameter schema, projected verbatim; the tool validates its own arguments.
    pub fn parameters(mut self, schema: Json) -> Self {
        self.parameters = schema;
        self
    }
    /// A parameter schema the registry validates arguments against before the body runs.
    /// [`build`](Self::build) refuses a schema with authoring errors.
    pub fn validated_parameters(mut self, schema: Json) -> Self {
        self.parameters = schema;
        self.validate_arguments = true;
        self
    }
    /// A raw parameter schema snapshotted from any serializable value (like [`parameters`](Self::parameters)).
    /// A schema that is not lossless JSON (a NaN or infinite number) makes [`build`](Self::build)
    /// fail with [`CoreError::LossyParameters`] instead of being projected changed.
    pub fn parameters_from<T: serde::Serialize + ?Sized>(mut self, schema: &T) -> Self {
        match Json::snapshot(schema) {
            Ok(json) => {
                self.parameters = json;
                self.lossy_parameters = false;
            }
            Err(_) => self.lossy_parameters = true,
        }
        self
    }
    /// Parameters from a Rust input type (`schemars`), validated before the body runs.
    pub fn typed_parameters<I: schemars::JsonSchema>(self) -> Self {
        self.validated_parameters(crate::typed::schema_for::<I>())
    }
    /// The output contract.
    pub fn output(mut self, output: ToolOutput) -> Self {
        self.output = Some(output);
        self
    }
    /// The body.
    pub fn body(mut self, body: impl ToolBody) -> Self {
        self.body = Some(Arc::new(body));
        self
    }
    /// The body as an async closure.
    pub fn execute<F, Fut>(self, f: F) -> Self
    where
        F: Fn(ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Json, Failure>> + Send + 'static,
    {
        self.body(FnBody(f))
    }
    /// The finalizer.
    pub fn finalize_content(
        mut self,
        f: impl Fn(&ToolExecution, &ToolResult) -> Result<Option<Content>, Failure>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.finalize_content = Some(Arc::new(f));
        self
    }
    /// The budget (at least a millisecond, at most `i32::MAX` milliseconds; checked by
    /// [`ToolBuilder::build`]).
    pub fn timeout(mut self, budget: std::time::Duration) -> Self {
        self.timeout_ms = Some(budget.as_secs_f64() * 1000.0);
        self
    }
    /// The budget as a configuration number of milliseconds (a JSON or TOML value, which may
    /// be fractional, negative or not finite: [`ToolBuilder::build`] refuses those). Rust code
    /// gives a [`std::time::Duration`] to [`ToolBuilder::timeout`].
    pub fn timeout_ms_from_config(mut self, ms: f64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }
    /// Marks every call parallel-safe (`true`) or exclusive (`false`).
    pub fn concurrency_safe(mut self, safe: bool) -> Self {
        self.concurrency = if safe {
            Concurrency::Parallel
        } else {
            Concurrency::Exclusive
        };
        self
    }
    /// Classifies each call from its arguments.
    pub fn classify(mut self, f: impl Fn(&Value) -> bool + Send + Sync + 'static) -> Self {
        self.concurrency = Concurrency::Classify(Arc::new(f));
        self
    }
    /// Declares how to read the permission subject from arguments (one part, one spelling).
    pub fn permission_subject(
        mut self,
        f: impl Fn(&Value) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.permission_subject = Some(Arc::new(move |v, _| f(v).map(PermissionSubject::single)));
        self
    }

    /// Declares how to read a permission subject with parts and spellings from a call's
    /// arguments and agent (a file tool resolves a path from the agent's working directory).
    pub fn permission_subjects(
        mut self,
        f: impl Fn(&Value, Option<&AgentId>) -> Option<PermissionSubject> + Send + Sync + 'static,
    ) -> Self {
        self.permission_subject = Some(Arc::new(f));
        self
    }
    /// Finishes the definition. Fails without an output contract or a body, with a budget that
    /// is not a positive finite number, with lossy parameters, or with a validated parameter or
    /// output schema that has authoring errors.
    pub fn build(self) -> Result<ToolDefinition, CoreError> {
        let output = self.output.ok_or(CoreError::MissingOutput)?;
        let body = self.body.ok_or(CoreError::MissingBody)?;
        if self.lossy_parameters {
            return Err(CoreError::LossyParameters(self.name.to_string()));
        }
        let invalid = |part: &'static str, error| CoreError::InvalidSchema {
            tool: self.name.to_string(),
            part,
            error,
        };
        if self.validate_arguments {
            validate::check_schema(self.parameters.value())
                .map_err(|e| invalid("parameters", e))?;
        }
        validate::check_schema(output.schema.value()).map_err(|e| invalid("output", e))?;
        let timeout_ms = match self.timeout_ms {
            None => None,
            Some(ms) if ms.is_finite() && ms > 0.0 => Some(budget_within_max(ms.ceil() as u64)?),
            Some(_) => return Err(CoreError::Timeout),
        };
        Ok(ToolDefinition {
            name: self.name,
            description: self.description,
            parameters_precheck: validate::Precheck::of(self.parameters.value()),
            parameters: self.parameters,
            validate_arguments: self.validate_arguments,
            output,
            body,
            finalize_content: self.finalize_content,
            timeout_ms,
            concurrency: self.concurrency,
            permission_subject: self.permission_subject,
        })
    }
}
