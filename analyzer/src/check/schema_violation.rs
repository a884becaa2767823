//! `schema-violation` (error): a rendered object does not match the OpenAPI schema of its
//! kind: an unknown field, a value of the wrong type, a missing required field, or a value
//! outside an `enum`.
//!
//! Built-in kinds are checked against the Kubernetes 1.34 schema, generated from upstream's
//! OpenAPI spec (`analyzer/schemas/k8s-v1.34.json`, `hack/gen-k8s-schema.sh`); custom
//! resources against the `openAPIV3Schema` of a CustomResourceDefinition found in the
//! repository. A built-in kind the target release does not serve is `unserved-api`'s finding;
//! a custom resource whose CRD is not in the repository (installed only in the cluster) is
//! not checked. The API server would reject such an object (or, for an unknown field, drop it
//! silently).
//!
//! The diagnostic points at the field when the app lists the object verbatim (`k8s-objects`),
//! else at the property in the Application that produced the field when a property of that
//! name exists in the component (or its traits), otherwise at the component's (or trait's)
//! `type`. At most 20 findings are reported per object.
//!
//! ```yaml
//! components:
//!   - name: cache
//!     type: k8s-objects
//!     properties:
//!       objects:
//!         - apiVersion: v1
//!           kind: Service
//!           metadata: {name: cache}
//!           spec:
//!             ports: [{port: "6379"}]   # error: `spec.ports[0].port` must be an integer
//! ```

use serde_json::Value;

use super::AppContext;
use crate::load::yaml::escape_segment;
use crate::schema::{Problem, Violation};
use crate::{Diagnostic, RenderedObject};

/// `api_version` and `kind` are the object's.
pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    api_version: &str,
    kind: &str,
    out: &mut Vec<Diagnostic>,
) {
    let violations = ctx
        .crd_schemas
        .validate_as(&object.object, api_version, kind)
        .or_else(|| crate::schema::kubernetes().validate_as(&object.object, api_version, kind));
    let Some(violations) = violations else {
        return;
    };
    if violations.is_empty() {
        return;
    }
    let label = super::object_label(&object.object);
    for violation in violations {
        let span = source_span(ctx, object, &violation);
        out.push(ctx.at_object(
            object,
            Diagnostic::error(
                "schema-violation",
                format!("{label}: {violation}"),
                Some(span),
            ),
        ));
    }
}

/// The property that produced the offending field, when the component or one of its traits
/// has exactly one property of that name; the object's component or trait otherwise.
fn source_span(ctx: &AppContext<'_>, object: &RenderedObject, violation: &Violation) -> cue::Span {
    if let Some(base) = ctx.written_object(object) {
        let pointer = format!("{base}{}", pointer_of(&violation.path));
        let positions = &ctx.loaded.document.positions;
        return match violation.problem {
            Problem::UnknownField => positions.key_span(&pointer),
            _ => positions.value_span(&pointer),
        };
    }
    let fallback = ctx.object_span(object);
    let (Some(field), Some(index)) = (
        violation.field.as_deref(),
        ctx.component_index(&object.component),
    ) else {
        return fallback;
    };
    // A missing field has no source; point at where the object came from.
    if violation.problem == Problem::MissingRequired {
        return fallback;
    }
    let component = &ctx.loaded.app.spec.components[index];
    let base = format!("/spec/components/{index}");
    let mut found = Vec::new();
    if let Some(properties) = &component.properties {
        find_key(properties, field, &format!("{base}/properties"), &mut found);
    }
    for (trait_index, component_trait) in component.traits.iter().enumerate() {
        if let Some(properties) = &component_trait.properties {
            let pointer = format!("{base}/traits/{trait_index}/properties");
            find_key(properties, field, &pointer, &mut found);
        }
    }
    let positions = &ctx.loaded.document.positions;
    match found.as_slice() {
        [pointer] if positions.contains(pointer) => match violation.problem {
            Problem::UnknownField => positions.key_span(pointer),
            _ => positions.value_span(pointer),
        },
        _ => fallback,
    }
}

/// Every JSON pointer under `pointer` whose last segment is `key`.
fn find_key(value: &Value, key: &str, pointer: &str, found: &mut Vec<String>) {
    if found.len() > 1 {
        return;
    }
    match value {
        Value::Object(map) => {
            for (name, child) in map {
                let child_pointer = format!("{pointer}/{}", escape_segment(name));
                if name == key {
                    found.push(child_pointer.clone());
                }
                find_key(child, key, &child_pointer, found);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                find_key(child, key, &format!("{pointer}/{index}"), found);
            }
        }
        _ => {}
    }
}

/// The JSON pointer of a violation's dotted path (`spec.ports[0].port` is
/// `/spec/ports/0/port`).
fn pointer_of(path: &str) -> String {
    let mut pointer = String::new();
    for part in path.split('.').filter(|part| !part.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|name| !name.is_empty()) {
            pointer.push('/');
            pointer.push_str(&escape_segment(name));
        }
        for index in pieces {
            pointer.push('/');
            pointer.push_str(index.trim_end_matches(']'));
        }
    }
    pointer
}
