//! Topics: appends and export, the lease and fencing, takeover repair, bad rows, live tails,
//! import, connection faults.

mod appends;
mod connect;
mod faults;
mod fleet;
mod lease;
mod rows;
mod schema;
mod support;
