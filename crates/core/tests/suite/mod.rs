//! Conformance lines owned by dsh-core (REG, SCH-01..10, TMO-13..33, the quick-reference strings)
//! and the property tests of its invariants.

mod classify;
mod deadline;
mod deep;
mod fixtures;
mod messages;
mod precheck;
mod properties;
mod registry;
mod schema_dsl;
mod scoping;
mod validation;
mod values;
