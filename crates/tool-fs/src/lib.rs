//! # dsh-tool-fs
//!
//! The filesystem side of the dsh tool pipeline: a confined, versioned, atomic filesystem seam;
//! the `fs/write-intent`, `fs/edit-intent` and `fs/observed` hook points; the read-before-write
//! observation policy; and the file tools `read`, `write`, `edit`, `glob` and `grep` with the
//! reference's model-facing names, parameters and output formats.
//!
//! To mount: build a [`Workspace`] over the roots, wrap it in [`FsTools`], optionally
//! [`FsTools::mount_policy`], bind each agent to its session with [`FsSessions::bind`], and call
//! [`register_fs_tools`]. On resume, feed the session's tool results' meta through
//! [`observation_from_meta`] into [`ObservationPolicy::restore`].
//!
//! It deliberately does NOT: schedule or classify calls beyond declaring each tool's concurrency
//! (reads and searches parallel, mutations exclusive), store or replay sessions (the caller hands
//! it the observations to restore), answer approval questions (it asks them, through the
//! pipeline, for a call that would reach a file outside the roots: FS-36..39, see
//! [`FsTools::with_escalation`]), or serialize writes made by other processes. `read` returns
//! a PNG, JPEG, GIF or WebP file as a picture (FS-77/78, `image.rs`).
//!
//! Spec rules owned here: FS1 (intent waterfalls raised before every mutation, default
//! unconditional, first decider owns it), FS2 (the observation policy, per session id, compare-
//! and-set in the seam, own writes recorded as observed), FS3 (confinement to the roots, atomic
//! writes, observations rebuilt from the log), and the conformance lines FS-01..35, FS-40..76.
//!
//! ## Example
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use dsh_core::ToolRegistry;
//! use dsh_tool_fs::{FsContext, FsTools, Workspace, register_fs_tools};
//!
//! let dir = tempfile::tempdir()?;
//! let tools = FsTools::new(Workspace::new([dir.path()])?);
//! let cwd = tools.workspace().default_cwd().to_path_buf();
//! tools.sessions().set_default(FsContext::new("s1", cwd));
//! tools.mount_policy().keep(); // read before write
//! let registry = ToolRegistry::new();
//! register_fs_tools(&registry, &tools)?.keep();
//! assert_eq!(registry.names(None), ["read", "write", "edit", "glob", "grep"]);
//! # Ok(()) }
//! ```
//!
//! Session of a call: the tools look up an [`FsContext`] (session id, working directory) from the
//! call's agent in [`FsSessions`], falling back to a default context; a call whose context has no
//! session id has no owner, so the policy lets it only create files and never edit.
//!
//! Everything public is re-exported at the root; the public modules are namespaces: [`codes`]
//! (the error codes), [`names`] (the tool names), [`text`] (how bytes become the lines a read
//! shows) and [`diff`] (the diffs in a mutation's `meta`).

// The public modules are namespaces a user names (`codes::FS_NOT_TEXT`, `names::READ`,
// `text::lines`, `diff::for_rewrite`); every other module is private and its public items are
// re-exported below, chosen one by one.
mod atomic;
pub mod codes;
mod confine;
pub mod diff;
mod error;
mod escalation;
mod image;
mod intent;
mod locks;
mod mount;
mod policy;
mod remedy;
mod replay;
mod seam;
mod session;
pub mod text;
mod tools;
mod version;

#[doc(hidden)]
pub use atomic::{FaultHook, WriteStage};
pub use error::FsError;
pub use escalation::{ESCALATED_MODE, EscalationPolicy};
pub use image::{MAX_IMAGE_BYTES, sniff as image_type};
pub use intent::{
    EditDecision, FsHooks, IntentQuery, Observation, ObservedEvent, ObservedHandle,
    ObservedListeners, ReadGate, WriteDecision,
};
pub use mount::{FsTools, FsToolsHandle, PROMPT_SECTIONS, register_fs_tools};
pub use policy::ObservationPolicy;
pub use remedy::apply_remedy;
pub use replay::observation_from_meta;
pub use seam::{
    EditCondition, EditOutcome, FileContents, LinePage, MAX_FILE_BYTES, OpCounts, Workspace,
    WriteCondition, WriteOutcome,
};
pub use session::{FsContext, FsSessions};
pub use version::{FileVersion, VersionParseError};

/// The tool names, as the model sees them.
pub mod names {
    pub use crate::tools::edit::NAME as EDIT;
    pub use crate::tools::glob::NAME as GLOB;
    pub use crate::tools::grep::NAME as GREP;
    pub use crate::tools::read::NAME as READ;
    pub use crate::tools::write::NAME as WRITE;
}
