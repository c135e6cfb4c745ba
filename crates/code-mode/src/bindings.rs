//! The `tools` bindings a program sees: the names it may call and the host that answers. Every
//! call crosses as JSON text and is checked here (known name, lossless JSON) before the host
//! sees it, whichever runtime made it.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_core::Json;
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::outcome::ToolCallError;
use crate::subcall::{Drive, LocalDriver};

/// The prefix of every argument rejection (the conformance checklist counts it).
pub const ARGS_NOT_LOSSLESS: &str = "tool arguments must be lossless JSON";

/// The reason given when a binding is called without arguments.
pub const MISSING_ARGS: &str = "call the tool with an arguments object";

/// Answers the program's tool calls. The answer is the sub-call's canonical value, or a
/// rejection with the tool's name and the reason.
pub trait Host: Send + Sync + 'static {
    /// Runs one call of `name` with `args` and settles with its value or its rejection.
    fn call(&self, name: &str, args: Json) -> BoxFuture<'static, Result<Json, ToolCallError>>;
}

/// The binding table of one run: the callable names (a plain set; no name is special, not even
/// `__proto__`) and the host behind them.
#[derive(Clone)]
pub struct Bindings {
    names: Arc<[Arc<str>]>,
    index: Arc<HashSet<Arc<str>>>,
    host: Arc<dyn Host>,
    /// The sub-call coordinator behind `host`, when a runtime may poll it on its own thread.
    drive: Option<Arc<Drive>>,
}

impl std::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bindings")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Bindings {
    /// Bindings for `names` (duplicates are dropped, order is kept) answered by `host`.
    pub fn new(names: impl IntoIterator<Item = Arc<str>>, host: Arc<dyn Host>) -> Bindings {
        let mut index = HashSet::new();
        let mut ordered = Vec::new();
        for n in names {
            if index.insert(n.clone()) {
                ordered.push(n);
            }
        }
        Bindings {
            names: Arc::from(ordered),
            index: Arc::new(index),
            host,
            drive: None,
        }
    }

    /// The same bindings, whose host is answered by the coordinator `drive`.
    pub(crate) fn with_drive(mut self, drive: Arc<Drive>) -> Bindings {
        self.drive = Some(drive);
        self
    }

    /// Claims the coordinator behind the host for the calling thread, which then polls it
    /// (see [`LocalDriver`]); `None` if there is none or it already runs elsewhere.
    pub(crate) fn claim_local(&self) -> Option<LocalDriver> {
        self.drive.as_ref().and_then(|d| d.claim())
    }

    /// The callable names, in presentation order.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// Whether `name` is callable.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains(name)
    }

    /// One call from the program: `args` is the JSON text of the argument object (`None` when
    /// the program passed none). Unknown names and arguments that are not JSON are rejected
    /// here, before the host sees anything.
    pub fn call(
        &self,
        name: &str,
        args: Option<&str>,
    ) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        self.answer(name, self.check(name, args))
    }

    /// The host's answer to a call that passed the checks, or its rejection.
    pub(crate) fn answer(
        &self,
        name: &str,
        checked: Result<Json, ToolCallError>,
    ) -> BoxFuture<'static, Result<Json, ToolCallError>> {
        match checked {
            Ok(json) => self.host.call(name, json),
            Err(e) => async move { Err(e) }.boxed(),
        }
    }

    /// The rejection of a name that is no binding.
    fn known(&self, name: &str) -> Result<(), ToolCallError> {
        if self.contains(name) {
            return Ok(());
        }
        Err(ToolCallError::new(
            name,
            dsh_core::codes::messages::unknown_tool(name),
        ))
    }

    /// The checks of [`Bindings::call`] alone: the parsed arguments of a call the host may
    /// see, or its rejection.
    pub(crate) fn check(&self, name: &str, args: Option<&str>) -> Result<Json, ToolCallError> {
        self.known(name)?;
        parse_args(name, args)
    }
}

/// The arguments' JSON text of a call of `name` (a binding), parsed, or its rejection.
pub(crate) fn parse_args(name: &str, args: Option<&str>) -> Result<Json, ToolCallError> {
    let Some(text) = args else {
        return Err(ToolCallError::new(
            name,
            format!("{ARGS_NOT_LOSSLESS}: {MISSING_ARGS}"),
        ));
    };
    Json::parse(text).map_err(|e| ToolCallError::new(name, format!("{ARGS_NOT_LOSSLESS}: {e}")))
}
