//! One file per topic; `support` holds the shared fakes.

mod approval_routing;
mod approval_service;
mod config;
mod guards;
mod metrics;
mod permission;
mod properties;
mod retry;
mod support;
mod timeout;
mod waterfall;
