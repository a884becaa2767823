//! OpenAPI validation of rendered objects: the Kubernetes 1.34 schema (generated from
//! upstream, embedded at build time) and the CustomResourceDefinitions of the repository,
//! compiled once into a flat node table and walked against each object.
//!
//! Validation is cheap by construction: the embedded artefact is compiled once per process
//! ([`kubernetes`]), field lookup is a binary search over sorted names, and walking an object
//! allocates nothing until a violation is found (the path is a stack of borrowed segments).
//!
//! What is checked, as the API server's strict decoding would: unknown fields (in an object
//! with declared properties and no `additionalProperties`), JSON types, required fields and
//! `enum` values (the enums the API server enforces, from `enums.rs`: upstream's OpenAPI has
//! none). `null` is accepted anywhere (the API server treats it as unset). Two types
//! are wider than their OpenAPI text, because the API server's decoder accepts more:
//! `IntOrString` (integer or string) and `Quantity` (string or number).

pub(crate) mod crd;
mod enums;
pub mod generate;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

/// The generated Kubernetes schema (see [`generate`]).
pub(crate) const KUBERNETES_SCHEMA: &str = include_str!("../../schemas/k8s-v1.34.json");

/// The definition the API server decodes with its own, wider rules (string or number).
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Stop after this many violations in one object: one mistake in a template can repeat in
/// every element of a list.
const MAX_VIOLATIONS: usize = 20;

type NodeId = u32;

#[derive(Debug, Clone)]
enum Node {
    Any,
    Object {
        /// Sorted by [`field_order`], for binary search.
        fields: Box<[Field]>,
        /// In the schema's order (the order violations are reported in).
        required: Box<[Box<str>]>,
        rest: Rest,
    },
    Array(NodeId),
    String,
    Integer,
    Number,
    Boolean,
    IntOrString,
    Quantity,
    /// `enum`: the value must equal one of these, and match `inner`.
    Enum {
        inner: NodeId,
        allowed: Box<[Value]>,
    },
    /// A definition whose whole body is a reference.
    Ref(NodeId),
}

/// A declared field of an object.
#[derive(Debug, Clone)]
struct Field {
    name: Box<str>,
    node: NodeId,
    /// The name is in the object's `required` list: counting these while walking an object
    /// tells that every required field is present without looking each one up.
    required: bool,
}

impl Field {
    fn new(name: &str, node: NodeId) -> Field {
        Field {
            name: name.into(),
            node,
            required: false,
        }
    }
}

/// The declared field `key` of an object node.
fn field<'f>(fields: &'f [Field], key: &str) -> Option<&'f Field> {
    fields
        .binary_search_by(|field| field_order(&field.name, key))
        .ok()
        .and_then(|index| fields.get(index))
}

/// The order of an object's fields: by length, then by bytes. Only lookups read it, and most
/// steps of a binary search are then decided by the lengths alone, without comparing text.
fn field_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// What an object allows besides its declared fields.
#[derive(Debug, Clone, Copy)]
enum Rest {
    Closed,
    Any,
    Schema(NodeId),
}

/// Compiled schemas with their GVK table.
#[derive(Debug, Default)]
pub(crate) struct SchemaSet {
    nodes: Vec<Node>,
    /// apiVersion → kind → root node.
    kinds: HashMap<Box<str>, HashMap<Box<str>, NodeId>>,
    /// Every `(apiVersion, kind)` the CRDs of this set declare as served, with or without a
    /// schema (empty for the Kubernetes schema, whose served kinds `check::api_versions` knows).
    declared: Vec<(Box<str>, Box<str>)>,
}

/// One problem found in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// Where, as a dotted path with list indexes (`spec.template.spec.containers[0].image`).
    pub(crate) path: String,
    /// The last field name on the path (the unknown or missing field, or the field with the
    /// wrong value), to find the source line that produced it.
    pub(crate) field: Option<String>,
    pub(crate) problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    UnknownField,
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    MissingRequired,
    NotAllowed {
        allowed: String,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            Problem::UnknownField => write!(f, "unknown field `{}`", self.path),
            Problem::WrongType { expected, found } => {
                write!(f, "`{}` must be {expected}, found {found}", self.path)
            }
            Problem::MissingRequired => write!(f, "missing required field `{}`", self.path),
            Problem::NotAllowed { allowed } => {
                write!(f, "`{}` must be one of {allowed}", self.path)
            }
        }
    }
}

/// The Kubernetes 1.34 schema, compiled on first use.
pub(crate) fn kubernetes() -> &'static SchemaSet {
    static SET: OnceLock<SchemaSet> = OnceLock::new();
    SET.get_or_init(|| {
        // The artefact is generated and checked in; `check_schema.rs` tests that it parses
        // and covers the core kinds, so failing here is a build defect, not bad input.
        let mut artefact: Value =
            serde_json::from_str(KUBERNETES_SCHEMA).expect("the embedded schema is valid JSON");
        enums::add_enums(&mut artefact);
        enums::drop_defaulted(&mut artefact);
        SchemaSet::from_artefact(&artefact)
    })
}

impl SchemaSet {
    /// Compiles the generated artefact (`{"kinds": {...}, "definitions": {...}}`).
    pub(crate) fn from_artefact(artefact: &Value) -> SchemaSet {
        let empty = serde_json::Map::new();
        let definitions = artefact
            .get("definitions")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut compiler = Compiler {
            nodes: Vec::with_capacity(definitions.len() * 4),
            names: HashMap::with_capacity(definitions.len()),
            empty_object_is_open: true,
        };
        for name in definitions.keys() {
            let id = compiler.push(Node::Any);
            compiler.names.insert(name.as_str(), id);
        }
        for (index, (name, schema)) in definitions.iter().enumerate() {
            let node = if name == QUANTITY {
                Node::Quantity
            } else {
                compiler.node(schema)
            };
            compiler.nodes[index] = node;
        }
        let mut set = SchemaSet {
            nodes: compiler.nodes,
            kinds: HashMap::new(),
            declared: Vec::new(),
        };
        let names = compiler.names;
        for (key, name) in artefact
            .get("kinds")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
        {
            let (Some((api_version, kind)), Some(&id)) = (
                key.split_once(' '),
                name.as_str().and_then(|name| names.get(name)),
            ) else {
                continue;
            };
            set.insert_kind(api_version, kind, id);
        }
        set
    }

    fn insert_kind(&mut self, api_version: &str, kind: &str, id: NodeId) {
        self.kinds
            .entry(api_version.into())
            .or_default()
            .insert(kind.into(), id);
    }

    /// True when this set has a schema for `apiVersion`/`kind`.
    #[cfg(test)]
    pub(crate) fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.root(api_version, kind).is_some()
    }

    /// Every `(apiVersion, kind)` this set has a schema for, in no particular order.
    pub(crate) fn kinds(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kinds.iter().flat_map(|(api_version, kinds)| {
            kinds.keys().map(move |kind| (&**api_version, &**kind))
        })
    }

    /// The `(apiVersion, kind)` pairs the CRDs of this set serve, with or without a schema.
    pub(crate) fn declared(&self) -> &[(Box<str>, Box<str>)] {
        &self.declared
    }

    fn root(&self, api_version: &str, kind: &str) -> Option<NodeId> {
        self.kinds.get(api_version)?.get(kind).copied()
    }

    /// Validates `object` against the schema of its `apiVersion` and `kind`; `None` when the
    /// set has no schema for them.
    pub(crate) fn validate(&self, object: &Value) -> Option<Vec<Violation>> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        self.validate_as(object, api_version, kind)
    }

    /// [`SchemaSet::validate`] of an object whose `apiVersion` and `kind` the caller has read.
    pub(crate) fn validate_as(
        &self,
        object: &Value,
        api_version: &str,
        kind: &str,
    ) -> Option<Vec<Violation>> {
        // Most repositories have no CRDs: their set answers every object without hashing its
        // `apiVersion` and `kind` first.
        if self.kinds.is_empty() {
            return None;
        }
        let root = self.root(api_version, kind)?;
        // Most objects are valid: a check that keeps no path answers them, and only an object
        // with a problem is walked again to name each violation.
        if self.conforms(root, object) {
            return Some(Vec::new());
        }
        let mut walk = Walk {
            set: self,
            path: Vec::new(),
            out: Vec::new(),
        };
        walk.value(root, object);
        Some(walk.out)
    }
}

impl SchemaSet {
    /// [`SchemaSet::conforms`], with the scalar nodes (most of an object's fields) answered
    /// here, without a call.
    #[inline(always)]
    fn conforms_leaf_first(&self, id: NodeId, value: &Value) -> bool {
        match self.nodes.get(id as usize) {
            Some(Node::String) => value.is_string() || value.is_null(),
            Some(Node::Any) | None => true,
            _ => self.conforms(id, value),
        }
    }

    /// True when [`Walk::value`] finds no violation in `value` against node `id`: the same
    /// rules, without a path or a report.
    fn conforms(&self, id: NodeId, value: &Value) -> bool {
        if value.is_null() {
            return true;
        }
        let Some(node) = self.nodes.get(id as usize) else {
            return true;
        };
        match node {
            Node::Any => true,
            Node::Ref(target) => self.conforms(*target, value),
            Node::Enum { inner, allowed } => {
                allowed.contains(value) && self.conforms(*inner, value)
            }
            Node::Object {
                fields,
                required,
                rest,
            } => {
                let Some(map) = value.as_object() else {
                    return false;
                };
                let mut required_present = 0;
                for (key, field_value) in map {
                    let target = match field(fields, key) {
                        Some(field) => {
                            required_present += usize::from(field.required);
                            field.node
                        }
                        None => match rest {
                            Rest::Any => continue,
                            Rest::Schema(id) => *id,
                            Rest::Closed => return false,
                        },
                    };
                    if !self.conforms_leaf_first(target, field_value) {
                        return false;
                    }
                }
                // A map's keys are distinct: as many required fields seen as there are
                // required names means all are there (a name listed twice, or required but
                // not declared, is looked up).
                required_present == required.len()
                    || required.iter().all(|name| map.contains_key(&**name))
            }
            Node::Array(items) => value.as_array().is_some_and(|list| {
                list.iter()
                    .all(|item| self.conforms_leaf_first(*items, item))
            }),
            Node::String => value.is_string(),
            Node::Integer => is_integer(value),
            Node::Number => value.is_number(),
            Node::Boolean => value.is_boolean(),
            Node::IntOrString => value.is_string() || is_integer(value),
            Node::Quantity => value.as_str().map_or(value.is_number(), is_quantity),
        }
    }
}

/// Validates `objects` against the Kubernetes 1.34 schema, in parallel, and counts the
/// violations (objects of unknown kinds count none). For benches and tools; the analysis
/// reports violations as `schema-violation` diagnostics.
pub fn count_violations(objects: &[Value]) -> usize {
    use rayon::prelude::*;
    let set = kubernetes();
    objects
        .par_iter()
        .map(|object| set.validate(object).map_or(0, |found| found.len()))
        .sum()
}

struct Compiler<'a> {
    nodes: Vec<Node>,
    names: HashMap<&'a str, NodeId>,
    /// `type: object` with neither properties nor `additionalProperties`: any object in
    /// Kubernetes' own schema (`RawExtension`, `FieldsV1`), an empty closed struct in a CRD's
    /// structural schema unless `x-kubernetes-preserve-unknown-fields`.
    empty_object_is_open: bool,
}

impl<'a> Compiler<'a> {
    fn push(&mut self, node: Node) -> NodeId {
        let id = NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX);
        self.nodes.push(node);
        id
    }

    /// The node of `schema`, reusing a definition for a bare `$ref`.
    fn id(&mut self, schema: &'a Value) -> NodeId {
        if let Some(target) = self.reference(schema) {
            return target;
        }
        let node = self.node(schema);
        self.push(node)
    }

    fn reference(&self, schema: &Value) -> Option<NodeId> {
        let name = schema.get("$ref")?.as_str()?;
        // Kubernetes' v3 documents and CRDs spell references in full.
        let name = name
            .trim_start_matches("#/definitions/")
            .trim_start_matches("#/components/schemas/");
        self.names.get(name).copied()
    }

    fn node(&mut self, schema: &'a Value) -> Node {
        let Some(object) = schema.as_object() else {
            return Node::Any;
        };
        if let Some(target) = self.reference(schema) {
            return Node::Ref(target);
        }
        let flag = |key: &str| object.get(key).and_then(Value::as_bool) == Some(true);
        let format = object.get("format").and_then(Value::as_str);
        let preserve = flag("x-kubernetes-preserve-unknown-fields");
        let base = if flag("x-kubernetes-int-or-string") || format == Some("int-or-string") {
            Node::IntOrString
        } else {
            match object.get("type").and_then(Value::as_str) {
                Some("object") => self.object(object, preserve),
                None if object.contains_key("properties") => self.object(object, preserve),
                Some("array") => match object.get("items") {
                    Some(items) => Node::Array(self.id(items)),
                    None => {
                        let any = self.push(Node::Any);
                        Node::Array(any)
                    }
                },
                Some("string") => Node::String,
                Some("integer") => Node::Integer,
                Some("number") => Node::Number,
                Some("boolean") => Node::Boolean,
                _ => Node::Any,
            }
        };
        let base = if flag("x-kubernetes-embedded-resource") {
            self.with_object_fields(base)
        } else {
            base
        };
        match object.get("enum").and_then(Value::as_array) {
            Some(allowed) if !allowed.is_empty() => {
                let inner = self.push(base);
                Node::Enum {
                    inner,
                    allowed: allowed.clone().into_boxed_slice(),
                }
            }
            _ => base,
        }
    }

    fn object(&mut self, object: &'a serde_json::Map<String, Value>, preserve: bool) -> Node {
        let mut fields: Vec<Field> = object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, property)| Field::new(name, self.id(property)))
            .collect();
        fields.sort_by(|a, b| field_order(&a.name, &b.name));
        let required: Box<[Box<str>]> = object
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(Box::from)
            .collect();
        for field in &mut fields {
            field.required = required.contains(&field.name);
        }
        let rest = match object.get("additionalProperties") {
            _ if preserve => Rest::Any,
            Some(Value::Bool(true)) => Rest::Any,
            Some(Value::Bool(false)) => Rest::Closed,
            Some(schema @ Value::Object(_)) => Rest::Schema(self.id(schema)),
            _ if fields.is_empty() && self.empty_object_is_open => Rest::Any,
            _ => Rest::Closed,
        };
        Node::Object {
            fields: fields.into_boxed_slice(),
            required,
            rest,
        }
    }
}

#[derive(Clone, Copy)]
enum Segment<'v> {
    Key(&'v str),
    Index(usize),
}

struct Walk<'a> {
    set: &'a SchemaSet,
    path: Vec<Segment<'a>>,
    out: Vec<Violation>,
}

impl<'a> Walk<'a> {
    fn report(&mut self, problem: Problem) {
        if self.out.len() >= MAX_VIOLATIONS {
            return;
        }
        let mut path = String::new();
        let mut field = None;
        for segment in &self.path {
            match segment {
                Segment::Key(key) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    field = Some(*key);
                }
                Segment::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        self.out.push(Violation {
            path,
            field: field.map(str::to_owned),
            problem,
        });
    }

    fn value(&mut self, id: NodeId, value: &'a Value) {
        if value.is_null() || self.out.len() >= MAX_VIOLATIONS {
            return;
        }
        let Some(node) = self.set.nodes.get(id as usize) else {
            return;
        };
        let expected = match node {
            Node::Any => return,
            Node::Ref(target) => return self.value(*target, value),
            Node::Enum { inner, allowed } => {
                if !allowed.contains(value) {
                    let allowed = allowed
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(", ");
                    self.report(Problem::NotAllowed { allowed });
                    return;
                }
                return self.value(*inner, value);
            }
            Node::Object {
                fields,
                required,
                rest,
            } => {
                let Some(map) = value.as_object() else {
                    return self.wrong_type("an object", value);
                };
                for (key, field_value) in map {
                    let target = match field(fields, key) {
                        Some(field) => Some(field.node),
                        None => match rest {
                            Rest::Any => None,
                            Rest::Schema(id) => Some(*id),
                            Rest::Closed => {
                                self.path.push(Segment::Key(key));
                                self.report(Problem::UnknownField);
                                self.path.pop();
                                continue;
                            }
                        },
                    };
                    if let Some(target) = target {
                        self.path.push(Segment::Key(key));
                        self.value(target, field_value);
                        self.path.pop();
                    }
                }
                for name in required.iter() {
                    if !map.contains_key(&**name) {
                        self.path.push(Segment::Key(name));
                        self.report(Problem::MissingRequired);
                        self.path.pop();
                    }
                }
                return;
            }
            Node::Array(items) => {
                let Some(list) = value.as_array() else {
                    return self.wrong_type("a list", value);
                };
                for (index, item) in list.iter().enumerate() {
                    self.path.push(Segment::Index(index));
                    self.value(*items, item);
                    self.path.pop();
                }
                return;
            }
            Node::String if value.is_string() => return,
            Node::String => "a string",
            Node::Integer if is_integer(value) => return,
            Node::Integer => "an integer",
            Node::Number if value.is_number() => return,
            Node::Number => "a number",
            Node::Boolean if value.is_boolean() => return,
            Node::Boolean => "a boolean",
            Node::IntOrString if value.is_string() || is_integer(value) => return,
            Node::IntOrString => "an integer or a string",
            Node::Quantity if value.as_str().map_or(value.is_number(), is_quantity) => return,
            Node::Quantity => "a quantity such as `500m`, `2`, `1.5Gi` or `1e3`",
        };
        self.wrong_type(expected, value);
    }

    fn wrong_type(&mut self, expected: &'static str, value: &Value) {
        let found = match value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) if is_integer(value) => "an integer",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        };
        self.report(Problem::WrongType { expected, found });
    }
}

/// The syntax of a resource quantity (`resource.ParseQuantity`): a signed decimal number and
/// an optional suffix (`Ki`..`Ei`, `n`, `u`, `m`, `k`, `M`..`E`, or an exponent `e3`).
pub(crate) fn is_quantity(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    if !number.contains(|c: char| c.is_ascii_digit()) || number.matches('.').count() > 1 {
        return false;
    }
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        exponent => exponent
            .strip_prefix(['e', 'E'])
            .map(|rest| rest.strip_prefix(['+', '-']).unwrap_or(rest))
            .is_some_and(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())),
    }
}

/// An integer, or a float without a fraction (`2.0` decodes into an `int32` field).
fn is_integer(value: &Value) -> bool {
    value.is_i64()
        || value.is_u64()
        || value
            .as_f64()
            .is_some_and(|float| float.fract() == 0.0 && float.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(set: &SchemaSet, object: Value) -> Vec<String> {
        set.validate(&object)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_embedded_schema_accepts_a_well_formed_deployment_and_finds_each_kind_of_mistake() {
        let set = kubernetes();
        let good = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": null},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web", "image": "nginx:1.27",
                        "ports": [{"containerPort": 80}],
                        "resources": {"limits": {"cpu": 0.5, "memory": "128Mi"}}
                    }]}
                }
            }
        });
        assert_eq!(messages(set, good), Vec::<String>::new());
        let bad = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"tier": 1}},
            "spec": {
                "replicas": "2",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"image": "nginx", "prots": [],
                    "ports": [{"containerPort": 80.5}]}]}}
            }
        });
        assert_eq!(
            messages(set, bad),
            [
                "`metadata.labels.tier` must be a string, found an integer",
                "`spec.replicas` must be an integer, found a string",
                "unknown field `spec.template.spec.containers[0].prots`",
                "`spec.template.spec.containers[0].ports[0].containerPort` must be an integer, found a number",
                "missing required field `spec.template.spec.containers[0].name`",
            ]
        );
    }

    /// Every object of a table and every one-step mutation of it (a value replaced by each JSON
    /// type, a key removed, an unknown key added): the path-free check says "valid" exactly
    /// when the reporting walk finds nothing.
    #[test]
    fn the_path_free_check_agrees_with_the_reporting_walk() {
        let set = kubernetes();
        let objects = [
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{
                            "name": "web", "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "b"}],
                            "resources": {"limits": {"cpu": 0.5, "memory": "128Mi"}}
                        }]}
                    }
                }
            }),
            json!({
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
            }),
            json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
                "spec": {"rules": [{"host": "a.example.com", "http": {"paths": [{
                    "path": "/", "pathType": "ImplementationSpecific",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}
                }]}}]}
            }),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
        ];
        let replacements = [
            json!(null),
            json!(true),
            json!(7),
            json!(1.5),
            json!("text"),
            json!([]),
            json!({}),
            json!([{"x": 1}]),
        ];
        let mut checked = 0;
        let mut invalid = 0;
        for object in &objects {
            let mut mutants = vec![object.clone()];
            mutate(object, &mut Vec::new(), &replacements, &mut mutants, object);
            for mutant in &mutants {
                // (Mutants without a kind name no schema.)
                let (Some(api_version), Some(kind)) =
                    (mutant["apiVersion"].as_str(), mutant["kind"].as_str())
                else {
                    continue;
                };
                let root = set.root(api_version, kind).unwrap();
                let mut walk = Walk {
                    set,
                    path: Vec::new(),
                    out: Vec::new(),
                };
                walk.value(root, mutant);
                assert_eq!(
                    set.conforms(root, mutant),
                    walk.out.is_empty(),
                    "{mutant}: {:?}",
                    walk.out
                );
                checked += 1;
                invalid += usize::from(!walk.out.is_empty());
            }
        }
        // Both answers occur, often.
        assert!(
            invalid > 100 && checked - invalid > 50,
            "{invalid} of {checked}"
        );
    }

    /// Pushes to `out` a copy of `root` per mutation of the value at `path` and below.
    fn mutate(
        value: &Value,
        path: &mut Vec<String>,
        replacements: &[Value],
        out: &mut Vec<Value>,
        root: &Value,
    ) {
        let at = |path: &[String]| {
            path.iter()
                .map(|segment| format!("/{segment}"))
                .collect::<String>()
        };
        if !path.is_empty()
            && path
                .first()
                .is_some_and(|first| first != "apiVersion" && first != "kind")
        {
            for replacement in replacements {
                let mut mutant = root.clone();
                *mutant.pointer_mut(&at(path)).unwrap() = replacement.clone();
                out.push(mutant);
            }
        }
        match value {
            Value::Object(map) => {
                let mut added = root.clone();
                added
                    .pointer_mut(&at(path))
                    .unwrap()
                    .as_object_mut()
                    .unwrap()
                    .insert("unknownField".to_owned(), json!(1));
                out.push(added);
                for (key, child) in map {
                    let mut removed = root.clone();
                    removed
                        .pointer_mut(&at(path))
                        .unwrap()
                        .as_object_mut()
                        .unwrap()
                        .shift_remove(key);
                    out.push(removed);
                    path.push(key.clone());
                    mutate(child, path, replacements, out, root);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    path.push(index.to_string());
                    mutate(child, path, replacements, out, root);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    #[test]
    fn unknown_kinds_are_not_validated() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": 1});
        assert_eq!(kubernetes().validate(&object), None);
        assert!(kubernetes().knows("v1", "ConfigMap"));
    }

    #[test]
    fn violations_stop_at_the_limit() {
        let containers: Vec<Value> = (0..50).map(|_| json!({"image": "x"})).collect();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": containers}});
        assert_eq!(kubernetes().validate(&pod).unwrap().len(), MAX_VIOLATIONS);
    }

    #[test]
    fn crd_schemas_are_structural() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "example.com", "names": {"kind": "Widget"}, "versions": [{
                "name": "v1",
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "port": {"x-kubernetes-int-or-string": true},
                        "empty": {"type": "object"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                            "properties": {"spec": {"type": "object"}}}
                    }}
                }}}
            }]}
        });
        let set = SchemaSet::from_crds([&crd]);
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {
                "port": "http", "empty": {"x": 1}, "free": {"y": [1]},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {}}
            }
        });
        assert_eq!(messages(&set, object), ["unknown field `spec.empty.x`"]);
        let wrong =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"port": true}});
        assert_eq!(
            messages(&set, wrong),
            ["`spec.port` must be an integer or a string, found a boolean"]
        );
        assert!(!set.knows("example.com/v2", "Widget"));
    }
}
