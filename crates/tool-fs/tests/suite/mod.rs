//! Topics of the dsh-tool-fs suite, named for the conformance groups they cover.

mod atomic;
mod bad_input;
mod common;
mod concurrency;
mod escape;
mod local;
mod policy;
mod props;
mod read_format;
mod remedy;
mod replay;
mod search;
mod tools_unit;
