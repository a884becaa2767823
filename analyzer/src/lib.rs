//! Everything knowable from a Git tree alone: the Application model, loading with positions,
//! rendering with KubeVela's semantics, checks and diagnostics. No I/O: it takes a snapshot of
//! files and returns data.
