//! `undocumented-parameter` (warning): a parameter of a repository definition without a
//! `// +usage=` comment.
//!
//! KubeVela's documentation generator (`vela def doc-gen`, VelaUX forms) shows the usage
//! text to the people who fill in the properties. Built-in definitions are not checked.
//!
//! ```cue
//! parameter: {
//!     // +usage=Container image
//!     image: string
//!     replicas: *1 | int      // warning: no +usage
//! }
//! ```

use super::unknown_property::{ParameterSchemas, Schema};
use crate::Diagnostic;
use crate::definitions::Definitions;

pub(crate) fn check(definitions: &Definitions, schemas: &ParameterSchemas) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for definition in definitions.iter().filter(|definition| !definition.builtin) {
        let Some(schema) = schemas.get(definition.kind, &definition.name) else {
            continue;
        };
        let mut missing = Vec::new();
        collect(&schema, &mut Vec::new(), &mut missing);
        if missing.is_empty() {
            continue;
        }
        out.push(Diagnostic::warning(
            "undocumented-parameter",
            format!(
                "{} `{}`: parameter(s) without a `// +usage=` description: {}",
                definition.kind.noun(),
                definition.name,
                missing.join(", ")
            ),
            Some(definition.span),
        ));
    }
    out
}

fn collect(schema: &Schema, path: &mut Vec<String>, missing: &mut Vec<String>) {
    let Schema::Struct(fields) = schema else {
        return;
    };
    for field in fields {
        path.push(field.label.clone());
        if !field.doc.iter().any(|line| line.contains("+usage=")) {
            missing.push(path.join("."));
        }
        collect(&field.schema, path, missing);
        path.pop();
    }
}
