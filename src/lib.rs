//! dsh facade
