//! Integration tests of the `driftless` binary's CLI: `render` and `plan` on `examples/repo`
//! (golden outputs under `tests/cli/golden/`, re-blessed with `UPDATE_EXPECT=1`), exit codes,
//! and bad input in temporary repositories. No cluster is needed: these run the pure core
//! through the real binary.

mod bad_input;
mod deploy;
mod examples;
mod secrets;
mod support;
