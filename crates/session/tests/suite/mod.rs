//! Topics: event shapes, the stores, crash repair, the checker, invariants, derived history,
//! reference fixtures, bad input and property tests.

mod bad_input;
mod check;
mod derive;
mod events;
mod fixtures;
mod invariants;
mod lazy_data;
mod model_visible;
mod on_demand;
mod props;
mod repair;
mod seam;
mod store;
mod support;
