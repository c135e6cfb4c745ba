//! # dsh-tool-bash (draft)
pub mod error;
pub mod mode;
pub mod sandbox;
pub use error::BashError;
pub use mode::SandboxMode;
