//! The dsh-hooks suite. Hook behaviour has no group of its own in the conformance checklist:
//! tests named `cc_NN_*` are lines of the Claude Code hooks issue; tests whose behaviour matches
//! a checklist line carry its id (`log_03`, `fin_13`, `grd_06`, `code_41`, ...).

mod code_mode;
mod failures;
mod post;
mod pre;
mod reference;
mod settings;
mod support;
