//! Topics of the Code Mode suite.

mod engine;
mod ergonomics;
mod escape;
mod lossless;
mod presentation;
mod props;
mod run_code;
mod subdispatch_pool;
mod subdispatch_results;
mod subdispatch_run_end;
mod support;
mod warm;
