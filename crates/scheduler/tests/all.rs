//! Integration tests of dsh-scheduler: the conformance lines of the staged runtime and the step
//! scheduler, each named with its id.

mod suite;
