//! Applying exactly what was reviewed: plan digests ([`digest`]), per-app holds stored in the
//! cluster ([`hold`]). The agent loop calls in here with a few lines per hook; the logic lives
//! in these modules.

pub mod digest;
pub mod hold;
