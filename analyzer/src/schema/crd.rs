//! Schemas of custom resources from the CustomResourceDefinitions in the repository
//! (`apiextensions.k8s.io/v1`, and the `spec.validation` of `v1beta1`).
//!
//! A CRD's `openAPIV3Schema` is a structural schema: an object without declared properties is
//! empty unless `x-kubernetes-preserve-unknown-fields` is set, and `apiVersion`, `kind` and
//! `metadata` are always allowed at the root and in `x-kubernetes-embedded-resource` objects.
//! A CRD that is not well formed yields no schema (its CRs go unchecked) rather than false
//! errors on them.

use serde_json::Value;

use super::{Compiler, Field, Node, NodeId, SchemaSet};

/// The fields the API server allows in every object whatever the schema says.
const OBJECT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

impl SchemaSet {
    /// Compiles the schema of every served version of `crds` (CRD documents as JSON).
    pub(crate) fn from_crds<'a>(crds: impl IntoIterator<Item = &'a Value>) -> SchemaSet {
        let mut compiler = Compiler {
            nodes: Vec::new(),
            names: std::collections::HashMap::new(),
            empty_object_is_open: false,
        };
        let mut kinds: Vec<(String, String, NodeId)> = Vec::new();
        let mut declared: Vec<(Box<str>, Box<str>)> = Vec::new();
        for crd in crds {
            let Some(spec) = crd.get("spec") else {
                continue;
            };
            let (Some(group), Some(kind)) = (
                spec.get("group").and_then(Value::as_str),
                spec.pointer("/names/kind").and_then(Value::as_str),
            ) else {
                continue;
            };
            let shared = spec.pointer("/validation/openAPIV3Schema");
            let version_names = spec
                .get("versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|version| version.get("served").and_then(Value::as_bool) != Some(false))
                .filter_map(|version| version.get("name")?.as_str())
                .chain(spec.get("version").and_then(Value::as_str));
            for version in version_names {
                declared.push((format!("{group}/{version}").into(), kind.into()));
            }
            let versions = spec
                .get("versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|version| {
                    let name = version.get("name")?.as_str()?;
                    let schema = version.pointer("/schema/openAPIV3Schema").or(shared)?;
                    Some((name, schema))
                });
            let single = spec
                .get("version")
                .and_then(Value::as_str)
                .zip(shared)
                .into_iter();
            for (version, schema) in versions.chain(single) {
                let root = compiler.root(schema);
                kinds.push((format!("{group}/{version}"), kind.to_owned(), root));
            }
        }
        let mut set = SchemaSet {
            nodes: compiler.nodes,
            kinds: std::collections::HashMap::new(),
            declared,
        };
        for (api_version, kind, root) in kinds {
            set.insert_kind(&api_version, &kind, root);
        }
        set
    }
}

impl<'a> Compiler<'a> {
    /// A CRD version's root: always an object that allows the common object fields.
    fn root(&mut self, schema: &'a Value) -> NodeId {
        let node = self.node(schema);
        let node = self.with_object_fields(node);
        self.push(node)
    }

    pub(super) fn with_object_fields(&mut self, node: Node) -> Node {
        match node {
            Node::Object {
                fields,
                required,
                rest,
            } => {
                let mut fields = fields.into_vec();
                for name in OBJECT_FIELDS {
                    if !fields.iter().any(|field| &*field.name == *name) {
                        let any = self.push(Node::Any);
                        let mut field = Field::new(name, any);
                        field.required = required.iter().any(|required| &**required == *name);
                        fields.push(field);
                    }
                }
                fields.sort_by(|a, b| super::field_order(&a.name, &b.name));
                Node::Object {
                    fields: fields.into_boxed_slice(),
                    required,
                    rest,
                }
            }
            other => other,
        }
    }
}
