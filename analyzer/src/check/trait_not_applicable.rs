//! `trait-not-applicable` (warning): a trait whose TraitDefinition's `appliesToWorkloads`
//! does not include the component's workload.
//!
//! The trait was not written for this workload, so its patch may not land where it should.
//! A warning, not an error: KubeVela's own examples attach `expose` (deployments and
//! statefulsets) to a `daemon`, and KubeVela renders them. An entry matches when it is `*`,
//! the component's type, the workload definition's name (`deployments.apps`), a group
//! wildcard (`*.apps`), the workload's kind (`Deployment`) or `apiVersion.kind`
//! (`apps/v1.Deployment`). The workload is read from the ComponentDefinition's
//! `spec.workload`, or from the rendered workload when the definition autodetects it.
//!
//! ```yaml
//! components:
//!   - name: nightly
//!     type: cron-task           # renders a CronJob
//!     traits:
//!       - type: scaler          # warning: applies to deployments.apps, statefulsets.apps, ...
//! ```

use super::AppContext;
use crate::Diagnostic;
use crate::model::DefinitionKind;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let positions = &ctx.loaded.document.positions;
    for (index, component) in ctx.loaded.app.spec.components.iter().enumerate() {
        let Some(names) = workload_names(ctx, &component.name, &component.component_type) else {
            continue;
        };
        for (trait_index, component_trait) in component.traits.iter().enumerate() {
            let Some(definition) = ctx
                .definitions
                .get(DefinitionKind::Trait, &component_trait.trait_type)
            else {
                continue;
            };
            let applies_to = &definition.trait_attributes.applies_to_workloads;
            if applies_to.is_empty() || applies_to.iter().any(|entry| matches(entry, &names)) {
                continue;
            }
            out.push(
                Diagnostic::warning(
                    "trait-not-applicable",
                    format!(
                        "trait `{}` does not apply to component `{}` (workload {}); it applies to: {}",
                        component_trait.trait_type,
                        component.name,
                        names.display(),
                        applies_to.join(", ")
                    ),
                    Some(positions.value_span(&format!(
                        "/spec/components/{index}/traits/{trait_index}/type"
                    ))),
                )
                .for_component(&component.name),
            );
        }
    }
}

/// The names a component's workload answers to, borrowed from its definition or its
/// rendered workload (most components match their traits' first entries: nothing is copied
/// for them).
struct WorkloadNames<'a> {
    component_type: &'a str,
    definition_type: Option<&'a str>,
    gvk: Option<Gvk<'a>>,
    /// The names `gvk` answers to, made when first needed and then once per component rather
    /// than per trait and entry: the resource (`deployments.apps`) and `<apiVersion>.<kind>`
    /// (`apps/v1.Deployment`).
    gvk_names: std::cell::OnceCell<(String, String)>,
}

#[derive(Clone, Copy)]
struct Gvk<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

impl WorkloadNames<'_> {
    /// How messages name the workload: its definition's workload type, else its resource.
    fn display(&self) -> String {
        match (self.definition_type, self.gvk) {
            (Some(name), _) => name.to_owned(),
            (None, Some(gvk)) => format!("{}.{}", plural(gvk.kind), gvk.group),
            (None, None) => String::new(),
        }
    }
}

fn workload_names<'a>(
    ctx: &AppContext<'a>,
    component: &str,
    component_type: &'a str,
) -> Option<WorkloadNames<'a>> {
    let definition = ctx
        .definitions
        .get(DefinitionKind::Component, component_type)?;
    let workload = definition.workload.as_ref();
    let definition_type = workload
        .and_then(|workload| workload.workload_type.as_deref())
        .filter(|workload_type| *workload_type != "autodetects.core.oam.dev");
    let declared = workload
        .and_then(|workload| Some((workload.api_version.as_deref()?, workload.kind.as_deref()?)));
    let rendered = || {
        let object = ctx
            .objects
            .iter()
            .find(|object| object.component == component && object.trait_type.is_none())?;
        let api_version = object.object.get("apiVersion")?.as_str()?;
        let kind = object.object.get("kind")?.as_str()?;
        Some((api_version, kind))
    };
    let gvk = declared.or_else(rendered).map(|(api_version, kind)| {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Gvk {
            group,
            version,
            kind,
        }
    });
    if definition_type.is_none() && gvk.is_none() {
        // Nothing known about the workload: nothing to check against.
        return None;
    }
    Some(WorkloadNames {
        component_type,
        definition_type,
        gvk,
        gvk_names: std::cell::OnceCell::new(),
    })
}

fn matches(entry: &str, names: &WorkloadNames<'_>) -> bool {
    if entry == "*" || entry == names.component_type {
        return true;
    }
    if names.definition_type == Some(entry) {
        return true;
    }
    let Some(Gvk {
        group,
        version,
        kind,
    }) = names.gvk
    else {
        return false;
    };
    let (resource, qualified) = names.gvk_names.get_or_init(|| {
        if group.is_empty() {
            (plural(kind), format!("{version}.{kind}"))
        } else {
            (
                format!("{}.{group}", plural(kind)),
                format!("{group}/{version}.{kind}"),
            )
        }
    });
    entry == resource
        || entry.eq_ignore_ascii_case(kind)
        || entry == qualified
        || entry
            .strip_prefix("*.")
            .is_some_and(|entry_group| entry_group == group)
}

/// The lowercase plural resource name of a kind (`Deployment` → `deployments`), by the
/// English rules Kubernetes' RESTMapper uses for built-in kinds.
fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with('s') || lower.ends_with("ch") || lower.ends_with('x') {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_of_kinds() {
        assert_eq!(plural("Deployment"), "deployments");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("Gateway"), "gateways");
    }
}
