//! Topics of the Code Mode suite.

mod engine;
mod ergonomics;
mod escape;
mod presentation;
mod props;
mod run_code;
mod subdispatch;
mod support;
