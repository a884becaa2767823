//! `trait-conflict` (error): a component has two traits where one's TraitDefinition lists
//! the other in `conflictsWith`.
//!
//! KubeVela's admission webhook rejects the Application. Reported at the trait whose
//! definition declares the conflict.
//!
//! ```yaml
//! traits:
//!   - type: scaler
//!   - type: hpa        # error when hpa's definition has `conflictsWith: [scaler]`
//! ```

use super::AppContext;
use crate::Diagnostic;
use crate::model::DefinitionKind;

pub(crate) fn check(ctx: &AppContext<'_>, out: &mut Vec<Diagnostic>) {
    let positions = &ctx.loaded.document.positions;
    for (index, component) in ctx.loaded.app.spec.components.iter().enumerate() {
        for (trait_index, component_trait) in component.traits.iter().enumerate() {
            let Some(definition) = ctx
                .definitions
                .get(DefinitionKind::Trait, &component_trait.trait_type)
            else {
                continue;
            };
            for conflict in &definition.trait_attributes.conflicts_with {
                let Some(other_index) =
                    component
                        .traits
                        .iter()
                        .enumerate()
                        .position(|(other_index, other)| {
                            other_index != trait_index && other.trait_type == *conflict
                        })
                else {
                    continue;
                };
                out.push(
                    Diagnostic::error(
                        "trait-conflict",
                        format!(
                            "trait `{}` conflicts with trait `{conflict}` on component `{}`",
                            component_trait.trait_type, component.name
                        ),
                        Some(positions.value_span(&format!(
                            "/spec/components/{index}/traits/{trait_index}/type"
                        ))),
                    )
                    .for_component(&component.name)
                    .with_label(
                        positions.value_span(&format!(
                            "/spec/components/{index}/traits/{other_index}/type"
                        )),
                        "conflicting trait",
                    ),
                );
            }
        }
    }
}
