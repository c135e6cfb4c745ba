//! The seam the agent loop talks to: [`Provider`], one request in, one chunk stream out.
//!
//! Guarantees (of every adapter in this crate): the future fails only before any chunk exists
//! (connection, status, retries exhausted); once it yields a stream, every later failure is an
//! item of that stream and nothing is sent again; dropping the stream closes the connection.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::chunk::ChunkStream;
use crate::error::ModelError;
use crate::request::Request;

/// A model provider. Object-safe: the loop holds an `Arc<dyn Provider>`.
pub trait Provider: Send + Sync {
    /// The provider's name, as errors and logs name it (`deepseek`, `anthropic`, ...).
    fn name(&self) -> &str;

    /// The bytes of the request body this provider would send for `request`, if it speaks HTTP
    /// JSON (a test compares them with what a server received; a dry run shows them).
    fn body(&self, _request: &Request) -> Option<Result<Vec<u8>, ModelError>> {
        None
    }

    /// Sends `request` and returns the response as a stream of chunks.
    fn stream(&self, request: Arc<Request>) -> BoxFuture<'_, Result<ChunkStream, ModelError>>;
}
