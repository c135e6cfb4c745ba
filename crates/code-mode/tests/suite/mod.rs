//! Topics of the Code Mode suite.

mod engine;
mod escape;
mod run_code;
mod subdispatch;
mod support;
