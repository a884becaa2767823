//! Sources: where snapshots come from. A work tree on disk ([`worktree`]) for the CLI, and git
//! repositories polled by the agent ([`git`]).

pub mod git;
pub mod worktree;
