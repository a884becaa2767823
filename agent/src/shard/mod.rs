//! Scale-out: agent replicas share a source's apps.
//!
//! - [`assign`]: consistent hashing with bounded loads, pure.
//! - [`sim`]: the simulation comparing it with round-robin and plain consistent hashing.

pub mod assign;
pub mod sim;
