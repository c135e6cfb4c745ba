//! Topics of the Code Mode suite.

mod engine;
mod support;
