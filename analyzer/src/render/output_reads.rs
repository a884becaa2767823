//! Which parts of `context.output` and `context.outputs` a trait template can observe, from its
//! syntax, so that only those parts are converted to JSON and injected.
//!
//! A trait that reads the workload (`labels`: `if context.output.spec.template != _|_`, `env`:
//! `for c in context.output.spec.template.spec.containers`) used to get the whole workload,
//! converted to JSON per trait and app, although it can only ever see one or two paths of it.
//! Every reference `context.output.a.b` keeps the subtree at `a.b`; a reference only tested
//! for existence (`context.output.a.b != _|_`, `== _|_`) keeps an empty placeholder of the
//! same kind there (a struct `{}`, a list `[]`, the scalar itself), which the test cannot tell
//! apart from the data: injected data is concrete and cannot be `_|_`.
//!
//! The answer is conservative, as [`cue::ast::File::may_read_fields`] is: everything is kept
//! whenever the syntax does not rule a part out — `context` used as a whole (`let c =
//! context`, `for k, v in context`, `(context).output`), indexed (`context["output"]`), a field
//! labelled `context` anywhere (a declaration unifies with the injection and may constrain
//! it), and at the top level a dynamic or pattern label or an embedded value other than a
//! struct literal (either may add a `context` field).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cue::InjectedReads;
use cue::ast::{BinaryOp, Expr, File};

/// What a template can observe of one injected value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Only whether it exists.
    Exists,
    /// All of it.
    All,
    /// The listed fields, each as given (when the value is a struct; anything else is kept
    /// whole, so that selecting from it fails with the same error).
    Fields(BTreeMap<String, Reads>),
}

impl Reads {
    /// `leaf` at `path` below the value, nothing else.
    fn at(path: &[&str], leaf: Reads) -> Reads {
        path.iter().rev().fold(leaf, |inner, label| {
            Reads::Fields(BTreeMap::from([((*label).to_owned(), inner)]))
        })
    }

    /// What either observes.
    fn merge(self, other: Reads) -> Reads {
        match (self, other) {
            (Reads::All, _) | (_, Reads::All) => Reads::All,
            (Reads::Exists, other) | (other, Reads::Exists) => other,
            (Reads::Fields(mut left), Reads::Fields(right)) => {
                for (label, reads) in right {
                    let merged = match left.remove(&label) {
                        Some(existing) => existing.merge(reads),
                        None => reads,
                    };
                    left.insert(label, merged);
                }
                Reads::Fields(left)
            }
        }
    }
}

/// What a trait template can observe of `context.output` and `context.outputs`; `None` for a
/// field it never refers to (it need not be injected at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutputReads {
    pub(crate) output: Option<Reads>,
    pub(crate) outputs: Option<Reads>,
    /// Whether the template may read any other field of `context` (decided as
    /// [`cue::ast::File::may_read_fields`] does): when not, its evaluation depends only on its
    /// properties and the parts of `context.output(s)` above.
    pub(crate) other_context: bool,
}

impl OutputReads {
    /// Everything: what a template gets when its syntax does not rule anything out.
    const EVERYTHING: OutputReads = OutputReads {
        output: Some(Reads::All),
        outputs: Some(Reads::All),
        other_context: true,
    };

    /// The parts of `context.output(s)` that `template` can observe.
    pub(crate) fn of(template: &File) -> OutputReads {
        let mut walk = Walk {
            whole: false,
            reads: OutputReads {
                output: None,
                outputs: None,
                other_context: true,
            },
        };
        template.walk_injected_reads(CONTEXT, &mut walk);
        if walk.whole {
            return OutputReads::EVERYTHING;
        }
        let other_fields: Vec<&str> = super::context::CONTEXT_FIELDS
            .iter()
            .copied()
            .filter(|field| !matches!(*field, "output" | "outputs"))
            .collect();
        OutputReads {
            other_context: template.may_read_fields(CONTEXT, &other_fields),
            ..walk.reads
        }
    }
}

/// More templates than this in one thread and the cache starts over (a long-running agent
/// may load many definition versions).
const CAPACITY: usize = 256;

/// A template kept alive with its answer, so that its address (the key) cannot be reused by
/// another template while the entry exists.
type Entry = (Arc<File>, Arc<OutputReads>);

thread_local! {
    /// Per template, by address.
    static CACHE: RefCell<HashMap<usize, Entry>> = RefCell::new(HashMap::new());
    /// Tests turn pruning off to compare renders with and without it.
    static PRUNE: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// [`OutputReads::of`] `template`, worked out once per template and thread.
pub(crate) fn output_reads(template: &Arc<File>) -> Arc<OutputReads> {
    if !PRUNE.with(std::cell::Cell::get) {
        return Arc::new(OutputReads::EVERYTHING);
    }
    let key = Arc::as_ptr(template) as usize;
    CACHE.with(|cache| {
        if let Some((_, reads)) = cache.borrow().get(&key) {
            return Arc::clone(reads);
        }
        let reads = Arc::new(OutputReads::of(template));
        let mut cache = cache.borrow_mut();
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(key, (Arc::clone(template), Arc::clone(&reads)));
        reads
    })
}

/// Turns pruning on or off for the current thread (tests compare renders with and without).
#[cfg(test)]
pub(crate) fn set_pruning(prune: bool) {
    PRUNE.with(|cell| cell.set(prune));
}

/// The injected field whose parts are tracked.
const CONTEXT: &str = "context";

/// Which of the two tracked fields of `context` a reference selects.
#[derive(Debug, Clone, Copy)]
enum Tracked {
    Output,
    Outputs,
}

/// `context.output.a.b` (or `context.outputs...`): the field and the labels after it.
fn chain(expr: &Expr) -> Option<(Tracked, Vec<&str>)> {
    let mut labels = Vec::new();
    let mut current = expr;
    loop {
        match current {
            Expr::Selector { base, label, .. } => {
                labels.push(label.as_str());
                current = base;
            }
            Expr::Ident(ident) if ident.name == CONTEXT => break,
            _ => return None,
        }
    }
    let field = match labels.pop()? {
        "output" => Tracked::Output,
        "outputs" => Tracked::Outputs,
        _ => return None,
    };
    labels.reverse();
    Some((field, labels))
}

/// What [`cue::ast::File::walk_injected_reads`] finds of `context.output(s)`.
struct Walk {
    /// Set once anything may observe all of `context`: nothing is left out then.
    whole: bool,
    reads: OutputReads,
}

impl Walk {
    fn add(&mut self, field: Tracked, path: &[&str], leaf: Reads) {
        let slot = match field {
            Tracked::Output => &mut self.reads.output,
            Tracked::Outputs => &mut self.reads.outputs,
        };
        let reads = Reads::at(path, leaf);
        *slot = Some(match slot.take() {
            Some(existing) => existing.merge(reads),
            None => reads,
        });
    }
}

impl InjectedReads for Walk {
    fn reference(&mut self, expr: &Expr) -> bool {
        if let Some((field, path)) = chain(expr) {
            self.add(field, &path, Reads::All);
            return true;
        }
        match expr {
            // Another field of `context` (`context.name`): not tracked.
            Expr::Selector { base, .. } => {
                matches!(base.as_ref(), Expr::Ident(ident) if ident.name == CONTEXT)
            }
            Expr::Binary {
                op: BinaryOp::Eq | BinaryOp::Ne,
                lhs,
                rhs,
                ..
            } => match existence_test(lhs, rhs) {
                Some((field, path)) => {
                    self.add(field, &path, Reads::Exists);
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    fn everything(&mut self) {
        self.whole = true;
    }

    fn settled(&self) -> bool {
        self.whole
    }
}

/// `context.output.a.b != _|_` (either side, `==` too): the tracked reference tested.
fn existence_test<'e>(lhs: &'e Expr, rhs: &'e Expr) -> Option<(Tracked, Vec<&'e str>)> {
    match (lhs, rhs) {
        (reference, Expr::Bottom(_)) | (Expr::Bottom(_), reference) => chain(reference),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads_of(source: &str) -> OutputReads {
        let parsed = cue::parse_file(cue::FileId(0), source);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        OutputReads::of(&parsed.file)
    }

    fn fields(entries: &[(&str, Reads)]) -> Reads {
        Reads::Fields(
            entries
                .iter()
                .map(|(label, reads)| ((*label).to_owned(), reads.clone()))
                .collect(),
        )
    }

    #[test]
    fn references_keep_their_subtree_and_existence_tests_a_placeholder() {
        let labels = reads_of(
            "patch: metadata: labels: parameter\n\
             if context.output.spec.template != _|_ {patch: spec: template: metadata: labels: parameter}\n\
             x: context.name\n",
        );
        assert_eq!(
            labels,
            OutputReads {
                output: Some(fields(&[("spec", fields(&[("template", Reads::Exists)]))])),
                outputs: None,
                // `context.name`.
                other_context: true,
            }
        );
        let env = reads_of(
            "_found: [for c in context.output.spec.template.spec.containers if c.name == \"x\" {c}]\n\
             if _|_ == context.output.spec.template {y: 1}\n\
             z: context.outputs.service.spec\n\
             w: \"\\(context.output.metadata.name)\"\n",
        );
        assert_eq!(
            env,
            OutputReads {
                output: Some(fields(&[
                    (
                        "spec",
                        fields(&[(
                            "template",
                            fields(&[("spec", fields(&[("containers", Reads::All)]))])
                        )])
                    ),
                    ("metadata", fields(&[("name", Reads::All)])),
                ])),
                outputs: Some(fields(&[("service", fields(&[("spec", Reads::All)]))])),
                other_context: false,
            }
        );
        // A reference to the whole field, and an existence test of a path read in full.
        assert_eq!(
            reads_of(
                "let o = context.output\nx: o.a\nif context.outputs.a != _|_ {y: context.outputs.a}\n"
            ),
            OutputReads {
                output: Some(Reads::All),
                outputs: Some(fields(&[("a", Reads::All)])),
                other_context: false,
            }
        );
    }

    #[test]
    fn anything_that_may_see_all_of_context_keeps_everything() {
        for source in [
            "x: context\n",
            "x: context[\"output\"].spec\n",
            "let c = context\nx: c.output.spec\n",
            "x: [for k, v in context {k}]\n",
            "y: (context).output.spec\n",
            "context: output: spec: replicas: int\n",
            "x: {context: 1}\n",
            "\"context\": _\n",
            "#Base\n#Base: {}\n",
            "for k, v in parameter {(k): v}\n",
            "[string]: _\n",
            "x: len(context)\n",
        ] {
            assert_eq!(reads_of(source), OutputReads::EVERYTHING, "{source}");
        }
        // Nothing of them at all.
        assert_eq!(
            reads_of("patch: spec: replicas: parameter.replicas\nx: context.name\n"),
            OutputReads {
                output: None,
                outputs: None,
                other_context: true,
            }
        );
    }

    #[test]
    fn merging_keeps_the_larger_read() {
        let exists = Reads::at(&["a", "b"], Reads::Exists);
        let all = Reads::at(&["a"], Reads::All);
        assert_eq!(exists.clone().merge(all.clone()), all);
        assert_eq!(all.clone().merge(exists.clone()), all);
        let other = Reads::at(&["a", "c"], Reads::All);
        assert_eq!(
            exists.merge(other),
            fields(&[("a", fields(&[("b", Reads::Exists), ("c", Reads::All)]))])
        );
        assert_eq!(
            Reads::Exists.merge(Reads::at(&["x"], Reads::All)),
            Reads::at(&["x"], Reads::All)
        );
    }

    /// Apps whose traits read `context.output(s)` in every way the built-in definitions do
    /// (existence tests, containers, outputs by name and as a whole), on workloads with and
    /// without the tested paths, including traits that fail on what they read.
    fn snapshot() -> crate::Snapshot {
        let groups = [
            "
        - type: labels
          properties: {tier: frontend}
        - type: annotations
          properties: {note: x}
        - type: env
          properties: {env: {A: \"1\"}}
        - type: resource
          properties: {cpu: \"1\"}
        - type: expose
          properties: {port: [80]}
        - type: gateway
          properties: {domain: example.com, http: {\"/\": 80}}
",
            "
        - type: command
          properties: {command: [\"sleep\", \"1\"]}
        - type: container-image
          properties: {image: \"nginx:2\"}
        - type: pure-ingress
          properties: {domain: example.com, http: {\"/\": 80}}
",
            "
        - type: container-ports
          properties: {ports: [{containerPort: 8080}]}
        - type: securitycontext
          properties: {runAsUser: 1000}
        - type: startup-probe
          properties: {httpGet: {port: 80}}
        - type: labels
          properties: {tier: backend}
",
        ];
        let components = [
            (
                "webservice",
                "{image: nginx, ports: [{port: 80, expose: true}], env: [{name: B, value: \"2\"}]}",
            ),
            ("worker", "{image: busybox}"),
            ("cron-task", "{image: busybox, schedule: \"*/1 * * * *\"}"),
        ];
        let mut files = Vec::new();
        for (index, (kind, properties)) in components.iter().enumerate() {
            for (group, traits) in groups.iter().enumerate() {
                files.push(crate::SourceFile {
                    path: format!("apps/app-{index}-{group}.yaml"),
                    contents: format!(
                        "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: app-{index}-{group}
  namespace: reads
spec:
  components:
    - name: c-{index}
      type: {kind}
      properties: {properties}
      traits:{traits}"
                    ),
                });
            }
        }
        // A container that does not exist: the traits' own errors, from what they read.
        files.push(crate::SourceFile {
            path: "apps/missing.yaml".to_owned(),
            contents: "apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: missing
  namespace: reads
spec:
  components:
    - name: web
      type: webservice
      properties: {image: nginx}
      traits:
        - type: env
          properties: {containerName: nope, env: {A: \"1\"}}
        - type: command
          properties: {containerName: nope, command: [\"x\"]}
"
            .to_owned(),
        });
        crate::Snapshot {
            commit: None,
            files,
        }
    }

    /// The whole output as text ([`crate::render::output_text`]).
    fn render_text(prune: bool) -> String {
        // One rayon thread, so the switch (per thread) covers every app.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            set_pruning(prune);
            let (output, _) = crate::render_snapshot(
                &snapshot(),
                &crate::Definitions::builtin(),
                &crate::RenderOptions::default(),
            );
            set_pruning(true);
            crate::render::output_text(&output)
        })
    }

    #[test]
    fn pruned_context_output_renders_the_same_objects_and_diagnostics() {
        let pruned = render_text(true);
        let whole = render_text(false);
        assert_eq!(pruned, whole);
        // The apps render (the comparison is not between two failures), and the broken one
        // reports what its traits read.
        for app in [
            "app-0-0", "app-0-1", "app-0-2", "app-1-0", "app-1-2", "app-2-0",
        ] {
            assert!(
                pruned.contains(&format!("\"app.oam.dev/name\":\"{app}\"")),
                "{app} did not render:\n{pruned}"
            );
        }
        assert!(pruned.contains("container nope not found"), "{pruned}");
    }
}
