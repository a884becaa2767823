//! Rendering: Application × Definitions → Kubernetes objects, with KubeVela's semantics.

pub(crate) mod patch;
