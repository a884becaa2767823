//! Trait evaluations remembered per rayon thread: a trait whose template cannot read any
//! `context` field renders the same for every app that gives it the same properties, so its
//! evaluation is done once per (definition, properties) and thread and then reused.
//!
//! Real fleets repeat trait configurations (KubeVela's load-test apps differ only in their
//! name): `scaler` with `replicas: 3` is one evaluation, not one per app. Whether a template
//! can read `context` is decided from its syntax when it is loaded
//! ([`crate::model::TemplateReads`], from [`cue::ast::File::may_read_fields`], which also
//! counts a declaration of `context` or a use of it as a whole as reading everything).
//! A template that reads no `context` field but `output` and `outputs` (`labels`, which only
//! tests whether the workload has a pod template) is remembered the same way, keyed also by
//! the parts of those it can observe (`output_reads.rs`), as injected.
//! What is kept is only what the renderer reads of a successful evaluation (`outputs`,
//! `patch`, `patchOutputs`, exported): a failed one is evaluated again for each app, since
//! its diagnostics point into that app's file.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use cue::{Exported, Take};
use serde_json::Value;

use crate::model::Definition;

/// What the renderer uses of one trait evaluation, exported.
#[derive(Debug, Clone)]
pub(crate) struct TraitResult {
    /// `outputs.<name>`, in CUE field order.
    pub(crate) outputs: Vec<(String, Exported)>,
    /// `patch` and its doc comments (the patch strategy).
    pub(crate) patch: Option<(Exported, Vec<String>)>,
    /// `patchOutputs.<name>`, in CUE field order.
    pub(crate) patch_outputs: Vec<(String, Exported)>,
}

impl TraitResult {
    /// The top-level fields of a trait evaluation the renderer reads.
    pub(crate) const REQUESTED: &'static [(&'static str, Take)] = &[
        ("outputs", Take::Fields),
        ("patch", Take::Export),
        ("patchOutputs", Take::Fields),
    ];

    /// The parts of an evaluation made with [`TraitResult::REQUESTED`], moved out of it.
    pub(crate) fn of(parts: &mut cue::Parts) -> TraitResult {
        TraitResult {
            outputs: parts.take_fields("outputs"),
            patch: parts.take_export("patch"),
            patch_outputs: parts.take_fields("patchOutputs"),
        }
    }

    /// True when no part holds an error value. Errors carry spans, and those may point into
    /// the app that was evaluated first: such a result is never shared.
    fn is_error_free(&self) -> bool {
        self.outputs
            .iter()
            .chain(&self.patch_outputs)
            .map(|(_, value)| value)
            .chain(self.patch.as_ref().map(|(patch, _)| patch))
            .all(|value| !has_bottom(value))
    }
}

fn has_bottom(value: &Exported) -> bool {
    match value {
        Exported::Bottom(_) => true,
        Exported::Struct(fields) => fields.iter().any(|field| has_bottom(&field.value)),
        Exported::List { elems, .. } => elems.iter().any(has_bottom),
        Exported::Default { default, others } => {
            has_bottom(default) || others.iter().any(has_bottom)
        }
        Exported::Scalar(_) | Exported::Incomplete(_) => false,
    }
}

/// Identifies a trait evaluation that does not depend on the app: the definition (by its
/// source digest, so a repository that redefines a trait gets its own entries) and the
/// properties as injected (Go-encoded JSON, keys sorted, so equal properties give equal text).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MemoKey {
    kind: &'static str,
    name: String,
    digest: [u8; 32],
    /// `None`: the trait has no `properties` (nothing injected as `parameter`).
    parameter: Option<String>,
}

impl MemoKey {
    /// The key of evaluating `definition` with `parameter`, or `None` when the result may
    /// depend on the app: its template can read some field of its context.
    pub(crate) fn new(definition: &Definition, parameter: Option<&Value>) -> Option<MemoKey> {
        if !enabled() || definition.template_reads.context {
            return None;
        }
        Some(MemoKey {
            kind: definition.kind.cr_kind(),
            name: definition.name.clone(),
            digest: definition.source_digest,
            parameter: parameter.map(Value::to_string),
        })
    }
}

impl MemoKey {
    /// The key of evaluating `definition`, whose template reads no `context` field but
    /// `output` and `outputs`, with `parameter` and the observed parts of those two (as
    /// injected: Go-encoded, keys sorted), or `None` when the memo is off.
    pub(crate) fn with_outputs(
        definition: &Definition,
        parameter: Option<&Value>,
        output: Option<&Value>,
        outputs: Option<&Value>,
    ) -> Option<MemoKey> {
        if !enabled() {
            return None;
        }
        // One text for all three: each part is JSON and tagged, so no two inputs share it.
        let mut text = String::new();
        for (tag, part) in [("p", parameter), ("o", output), ("s", outputs)] {
            if let Some(part) = part {
                text.push_str(tag);
                text.push_str(&part.to_string());
                text.push('\n');
            }
        }
        Some(MemoKey {
            kind: definition.kind.cr_kind(),
            name: definition.name.clone(),
            digest: definition.source_digest,
            parameter: Some(text),
        })
    }
}

/// More distinct entries than this in one thread and the memo starts over: a long-running
/// agent renders many commits, and a fleet that does not repeat trait configurations should
/// not grow a map it never hits.
const CAPACITY: usize = 4096;

thread_local! {
    static MEMO: RefCell<HashMap<MemoKey, TraitResult>> = RefCell::new(HashMap::new());
    static ENABLED: Cell<bool> = const { Cell::new(true) };
    static HITS: Cell<u64> = const { Cell::new(0) };
}

fn enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// The remembered result for `key`, cloned.
pub(crate) fn lookup(key: &MemoKey) -> Option<TraitResult> {
    let found = MEMO.with(|memo| memo.borrow().get(key).cloned());
    if found.is_some() {
        HITS.with(|hits| hits.set(hits.get() + 1));
    }
    found
}

/// Remembers `result` under `key` if it holds no error.
pub(crate) fn remember(key: MemoKey, result: &TraitResult) {
    if !result.is_error_free() {
        return;
    }
    MEMO.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.len() >= CAPACITY {
            memo.clear();
        }
        memo.insert(key, result.clone());
    });
}

/// Turns the memo of the current thread on or off (tests compare renders with and without
/// it); turning it off also forgets what it holds.
#[cfg(test)]
pub(crate) fn set_enabled(enabled: bool) {
    ENABLED.with(|cell| cell.set(enabled));
    MEMO.with(|memo| memo.borrow_mut().clear());
}

/// Memo hits on the current thread so far.
#[cfg(test)]
pub(crate) fn hits() -> u64 {
    HITS.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Definitions, RenderOptions, Snapshot, SourceFile, render_snapshot};

    /// Apps that repeat trait configurations (`scaler`, `sidecar`, `storage` with an output
    /// object), one that reads the context (`labels`), and two with the same broken `scaler`
    /// properties, whose diagnostics must each point into their own file.
    fn snapshot() -> Snapshot {
        let files = (0..6)
            .map(|index| {
                let replicas = if index >= 4 {
                    "\"many\"".to_owned()
                } else {
                    (index % 2 + 1).to_string()
                };
                SourceFile {
                    path: format!("apps/app-{index}.yaml"),
                    contents: format!(
                        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app-{index}
  namespace: memo
spec:
  components:
    - name: web-{index}
      type: webservice
      properties:
        image: nginx:1.{index}
      traits:
        - type: scaler
          properties:
            replicas: {replicas}
        - type: sidecar
          properties:
            name: log-shipper
            image: fluent-bit:3.1
        - type: storage
          properties:
            pvc:
              - name: data
                mountPath: /data
                storageClassName: standard
                resources:
                  requests:
                    storage: 1Gi
        - type: labels
          properties:
            tier: frontend
"
                    ),
                }
            })
            .collect();
        Snapshot {
            commit: None,
            files,
        }
    }

    /// The whole output as text ([`crate::render::output_text`]) and the memo's hits.
    fn render_text(memo: bool) -> (String, u64) {
        // One rayon thread, so the memo switch (per thread) covers every app.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            set_enabled(memo);
            let before = hits();
            let (output, _) = render_snapshot(
                &snapshot(),
                &Definitions::builtin(),
                &RenderOptions::default(),
            );
            let text = crate::render::output_text(&output);
            let hits = hits() - before;
            set_enabled(true);
            (text, hits)
        })
    }

    #[test]
    fn remembered_trait_evaluations_render_the_same_objects_and_diagnostics() {
        let (without, no_hits) = render_text(false);
        let (with, memo_hits) = render_text(true);
        assert_eq!(no_hits, 0);
        // scaler: 2 distinct valid properties among apps 0-3 (the broken ones in apps 4 and 5
        // are not kept, and their component stops there); sidecar and storage: one
        // evaluation for apps 0-3; labels reads only whether the workload has a pod template,
        // the same for apps 0-3: remembered under that too.
        assert_eq!(memo_hits, 2 + 3 + 3 + 3, "{with}");
        assert_eq!(with, without);
        // Both broken apps are reported, each in its own file.
        assert_eq!(with.matches("invalid-properties").count(), 2, "{with}");
    }
}
