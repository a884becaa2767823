//! `dependency-cycle` (error): components (or workflow steps) whose `dependsOn` form a cycle.
//!
//! None of them can start. The diagnostic is reported once per cycle, at the `dependsOn`
//! entry of its first member, and spells out the cycle.
//!
//! ```yaml
//! components:
//!   - {name: a, type: worker, dependsOn: [b]}   # error: a -> b -> a
//!   - {name: b, type: worker, dependsOn: [a]}
//! ```

use std::collections::BTreeSet;

use super::AppContext;
use crate::Diagnostic;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let spec = &ctx.loaded.app.spec;
    let components: Vec<(&str, &[String])> = spec
        .components
        .iter()
        .map(|component| (component.name.as_str(), component.depends_on.as_slice()))
        .collect();
    report(ctx, "component", "/spec/components", &components, out);
    if let Some(workflow) = &spec.workflow {
        let steps: Vec<(&str, &[String])> = workflow
            .steps
            .iter()
            .map(|step| (step.name.as_str(), step.depends_on.as_slice()))
            .collect();
        report(ctx, "workflow step", "/spec/workflow/steps", &steps, out);
    }
}

/// Finds every cycle through the graph `nodes` (name, dependencies) and reports each once.
fn report(
    ctx: &AppContext<'_>,
    noun: &str,
    pointer: &str,
    nodes: &[(&str, &[String])],
    out: &mut Vec<Diagnostic>,
) {
    let mut reported: BTreeSet<Vec<usize>> = BTreeSet::new();
    for start in 0..nodes.len() {
        let Some(cycle) = cycle_from(start, nodes) else {
            continue;
        };
        let mut key = cycle.clone();
        key.sort_unstable();
        if !reported.insert(key) {
            continue;
        }
        let first = cycle[0];
        let mut path: Vec<&str> = cycle.iter().map(|&index| nodes[index].0).collect();
        path.push(nodes[first].0);
        let next = nodes[cycle.get(1).copied().unwrap_or(first)].0;
        let dep_index = nodes[first].1.iter().position(|d| d == next).unwrap_or(0);
        let span = ctx
            .loaded
            .document
            .positions
            .value_span(&format!("{pointer}/{first}/dependsOn/{dep_index}"));
        let mut diagnostic = Diagnostic::error(
            "dependency-cycle",
            format!("{noun} dependency cycle: {}", path.join(" -> ")),
            Some(span),
        );
        if noun == "component" {
            diagnostic = diagnostic.for_component(nodes[first].0);
        }
        out.push(diagnostic);
    }
}

/// A cycle that starts and ends at `start`, as node indices in order, found depth-first.
fn cycle_from(start: usize, nodes: &[(&str, &[String])]) -> Option<Vec<usize>> {
    let index_of = |name: &str| nodes.iter().position(|(n, _)| *n == name);
    let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
    let mut visited = vec![false; nodes.len()];
    visited[start] = true;
    while let Some((node, edge)) = stack.last().copied() {
        let dependencies = nodes[node].1;
        let Some(dependency) = dependencies.get(edge) else {
            stack.pop();
            continue;
        };
        if let Some(last) = stack.last_mut() {
            last.1 += 1;
        }
        let Some(next) = index_of(dependency) else {
            continue;
        };
        if next == start {
            return Some(stack.iter().map(|(node, _)| *node).collect());
        }
        if !visited[next] {
            visited[next] = true;
            stack.push((next, 0));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cycles_through_the_start_only() {
        let a = vec!["b".to_owned()];
        let b = vec!["c".to_owned()];
        let c = vec!["a".to_owned()];
        let d = vec!["a".to_owned()];
        let nodes: Vec<(&str, &[String])> = vec![("a", &a), ("b", &b), ("c", &c), ("d", &d)];
        assert_eq!(cycle_from(0, &nodes), Some(vec![0, 1, 2]));
        assert_eq!(cycle_from(3, &nodes), None);
    }
}
