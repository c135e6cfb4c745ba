//! The agent loop against a model served over real HTTP and SSE (the mock provider of
//! dsh-test-support on 127.0.0.1, which checks each request the way the real API does).

mod suite;
