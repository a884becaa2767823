//! YAML documents loaded with positions: each document becomes a `serde_json::Value` plus a
//! [`Positions`] index from JSON-pointer paths to the span of the key and of the value.
//!
//! serde-saphyr does the YAML work (scalar resolution, anchors, multi-document streams); a
//! recursive visitor wraps every node in `serde_saphyr::Spanned` so that one pass yields both
//! the data and where each piece of it came from.

use std::collections::BTreeMap;

use cue::{FileId, Span};
use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// One YAML document with its positions.
#[derive(Debug, Clone)]
pub(crate) struct YamlDocument {
    pub(crate) value: serde_json::Value,
    pub(crate) positions: Positions,
}

/// A YAML error with its position.
#[derive(Debug, Clone)]
pub(crate) struct YamlError {
    pub(crate) message: String,
    pub(crate) span: Span,
}

/// JSON-pointer path (`/spec/components/1/properties/image`) → spans of the node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Positions {
    file: FileId,
    nodes: BTreeMap<String, NodeSpans>,
}

#[derive(Debug, Clone, Copy)]
struct NodeSpans {
    /// The key of a mapping entry; `None` for sequence elements and the root.
    key: Option<Span>,
    value: Span,
}

impl Positions {
    /// The span of the value at `pointer`, or of its nearest ancestor that has one.
    pub(crate) fn value_span(&self, pointer: &str) -> Span {
        self.find(pointer)
            .map_or(Span::new(self.file, 0, 0), |node| node.value)
    }

    /// The span of the key at `pointer` (the value's span for sequence elements), or of the
    /// nearest ancestor.
    pub(crate) fn key_span(&self, pointer: &str) -> Span {
        self.find(pointer)
            .map_or(Span::new(self.file, 0, 0), |node| {
                node.key.unwrap_or(node.value)
            })
    }

    /// The file these positions are in.
    pub(crate) fn file(&self) -> FileId {
        self.file
    }

    /// True when the exact path was present in the document.
    pub(crate) fn contains(&self, pointer: &str) -> bool {
        self.nodes.contains_key(pointer)
    }

    fn find(&self, pointer: &str) -> Option<&NodeSpans> {
        let mut current = pointer;
        loop {
            if let Some(node) = self.nodes.get(current) {
                return Some(node);
            }
            if current.is_empty() {
                return None;
            }
            current = current.rfind('/').map_or("", |slash| &current[..slash]);
        }
    }
}

/// Escapes one path segment for a JSON pointer (RFC 6901).
pub(crate) fn escape_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Parses every document of a YAML stream. Null documents (empty, or only comments) are
/// skipped. A syntax error anywhere fails the whole file: serde-saphyr stops at the first.
pub(crate) fn parse_documents(file: FileId, text: &str) -> Result<Vec<YamlDocument>, YamlError> {
    let nodes: Vec<Node> = serde_saphyr::from_str_multiple(text).map_err(|error| {
        let offset = error.location().map_or(0, |location| {
            location.span().byte_offset().map_or_else(
                || offset_of_line_col(text, location.line(), location.column()),
                |offset| offset as u32,
            )
        });
        YamlError {
            message: clean_message(&error.to_string()),
            span: Span::new(file, offset, offset),
        }
    })?;
    Ok(nodes
        .into_iter()
        .filter(|node| !matches!(node.value, NodeValue::Null))
        .map(|node| {
            let mut positions = Positions {
                file,
                nodes: BTreeMap::new(),
            };
            let root_span = span_of(file, &node.location);
            let value = node.into_json(file, String::new(), None, root_span, &mut positions);
            YamlDocument { value, positions }
        })
        .collect())
}

/// serde-saphyr's messages start with `error: line L column C: ` and may carry a rendered
/// snippet after the first line; the diagnostic renderer draws its own position and snippet.
fn clean_message(message: &str) -> String {
    let first = message.lines().next().unwrap_or("invalid YAML").trim();
    let without_prefix = first.strip_prefix("error: ").unwrap_or(first);
    let without_position = match without_prefix.strip_prefix("line ") {
        Some(rest) => rest
            .split_once(": ")
            .map_or(without_prefix, |(_, message)| message),
        None => without_prefix,
    };
    without_position.to_owned()
}

/// Byte offset of a 1-based line and character column.
fn offset_of_line_col(text: &str, line: u64, column: u64) -> u32 {
    let mut offset = 0usize;
    for (index, line_text) in text.split_inclusive('\n').enumerate() {
        if index as u64 + 1 == line {
            let in_line: usize = line_text
                .chars()
                .take(column.saturating_sub(1) as usize)
                .map(char::len_utf8)
                .sum();
            return (offset + in_line) as u32;
        }
        offset += line_text.len();
    }
    text.len() as u32
}

fn span_of(file: FileId, location: &serde_saphyr::Location) -> Span {
    let span = location.span();
    let start = span.byte_offset().unwrap_or(0) as u32;
    let len = span.byte_len().unwrap_or(0) as u32;
    Span::new(file, start, start + len)
}

/// A YAML node with the location of every child.
struct Node {
    value: NodeValue,
    location: serde_saphyr::Location,
}

enum NodeValue {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Seq(Vec<Spanned<NodeValue>>),
    Map(Vec<(Spanned<String>, Spanned<NodeValue>)>),
}

impl Node {
    fn into_json(
        self,
        file: FileId,
        pointer: String,
        key: Option<Span>,
        span: Span,
        positions: &mut Positions,
    ) -> serde_json::Value {
        value_into_json(self.value, file, pointer, key, span, positions)
    }
}

fn value_into_json(
    value: NodeValue,
    file: FileId,
    pointer: String,
    key: Option<Span>,
    span: Span,
    positions: &mut Positions,
) -> serde_json::Value {
    positions
        .nodes
        .insert(pointer.clone(), NodeSpans { key, value: span });
    match value {
        NodeValue::Null => serde_json::Value::Null,
        NodeValue::Bool(b) => serde_json::Value::Bool(b),
        NodeValue::Number(n) => serde_json::Value::Number(n),
        NodeValue::String(s) => serde_json::Value::String(s),
        NodeValue::Seq(items) => serde_json::Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(index, item)| {
                    let item_span = span_of(file, &item.referenced);
                    value_into_json(
                        item.value,
                        file,
                        format!("{pointer}/{index}"),
                        None,
                        item_span,
                        positions,
                    )
                })
                .collect(),
        ),
        NodeValue::Map(entries) => {
            let mut object = serde_json::Map::new();
            for (entry_key, entry_value) in entries {
                let key_span = span_of(file, &entry_key.referenced);
                let value_span = span_of(file, &entry_value.referenced);
                let child_pointer = format!("{pointer}/{}", escape_segment(&entry_key.value));
                let child = value_into_json(
                    entry_value.value,
                    file,
                    child_pointer,
                    Some(key_span),
                    value_span,
                    positions,
                );
                // YAML duplicate keys: serde-saphyr rejects them by default, so the last
                // insert never silently replaces an earlier one here.
                object.insert(entry_key.value, child);
            }
            serde_json::Value::Object(object)
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeValue>::deserialize(deserializer)?;
        Ok(Node {
            value: spanned.value,
            location: spanned.referenced,
        })
    }
}

/// Stack kept free before descending one YAML level, and the size of each new segment.
/// serde-saphyr caps nesting at 64 levels, but in a debug build one level through its
/// deserializer and this visitor takes tens of KB, so a 64-deep document overflowed a 2 MiB
/// thread stack (test threads, tokio workers) before the cap was reached.
const STACK_RED_ZONE: usize = 256 * 1024;
const STACK_SEGMENT: usize = 2 * 1024 * 1024;

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_SEGMENT, || {
            deserializer.deserialize_any(NodeVisitor)
        })
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(deserializer)
    }

    fn visit_bool<E>(self, value: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<NodeValue, E> {
        i64::try_from(value)
            .map(|v| NodeValue::Number(v.into()))
            .or_else(|_| u64::try_from(value).map(|v| NodeValue::Number(v.into())))
            .map_err(|_| E::custom("integer out of range"))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<NodeValue, E> {
        u64::try_from(value)
            .map(|v| NodeValue::Number(v.into()))
            .map_err(|_| E::custom("integer out of range"))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<NodeValue, E> {
        serde_json::Number::from_f64(value)
            .map(NodeValue::Number)
            .ok_or_else(|| E::custom("NaN and infinite numbers are not JSON"))
    }

    fn visit_str<E>(self, value: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<NodeValue, E> {
        Ok(NodeValue::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<NodeValue>>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<KeyString>>()? {
            let value = map.next_value::<Spanned<NodeValue>>()?;
            entries.push((
                Spanned::new(key.value.0, key.referenced, key.defined),
                value,
            ));
        }
        Ok(NodeValue::Map(entries))
    }
}

/// A mapping key as a string: YAML allows `80: x` or `true: x`; JSON object keys are strings.
struct KeyString(String);

impl<'de> Deserialize<'de> for KeyString {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyString;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a scalar mapping key")
            }
            fn visit_str<E>(self, value: &str) -> Result<KeyString, E> {
                Ok(KeyString(value.to_owned()))
            }
            fn visit_string<E>(self, value: String) -> Result<KeyString, E> {
                Ok(KeyString(value))
            }
            fn visit_bool<E>(self, value: bool) -> Result<KeyString, E> {
                Ok(KeyString(value.to_string()))
            }
            fn visit_i64<E>(self, value: i64) -> Result<KeyString, E> {
                Ok(KeyString(value.to_string()))
            }
            fn visit_u64<E>(self, value: u64) -> Result<KeyString, E> {
                Ok(KeyString(value.to_string()))
            }
            fn visit_f64<E>(self, value: f64) -> Result<KeyString, E> {
                Ok(KeyString(value.to_string()))
            }
            fn visit_unit<E>(self) -> Result<KeyString, E> {
                Ok(KeyString("null".to_owned()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_col(text: &str, span: Span) -> (u32, u32) {
        let index = cue::LineIndex::new(text);
        let lc = index.line_col(span.start);
        (lc.line, lc.column)
    }

    #[test]
    fn positions_point_at_keys_and_values() {
        let text = "a: 1\n---\nkind: App\nspec:\n  components:\n  - name: web\n    properties:\n      image: nginx\n";
        let documents = parse_documents(FileId(3), text).unwrap();
        assert_eq!(documents.len(), 2);
        let doc = &documents[1];
        assert_eq!(
            doc.value["spec"]["components"][0]["properties"]["image"],
            "nginx"
        );
        let image = "/spec/components/0/properties/image";
        assert_eq!(line_col(text, doc.positions.value_span(image)), (8, 14));
        assert_eq!(line_col(text, doc.positions.key_span(image)), (8, 7));
        assert_eq!(
            line_col(text, doc.positions.value_span("/spec/components/0")),
            (6, 5)
        );
        // A missing path falls back to its nearest ancestor.
        assert_eq!(
            line_col(text, doc.positions.key_span("/spec/components/0/traits")),
            line_col(text, doc.positions.value_span("/spec/components/0"))
        );
        assert_eq!(doc.positions.value_span(image).file, FileId(3));
    }

    #[test]
    fn scalars_resolve_like_yaml() {
        let documents =
            parse_documents(FileId(0), "a: 1\nb: 1.5\nc: true\nd: null\ne: '1'\n").unwrap();
        assert_eq!(
            documents[0].value,
            serde_json::json!({"a": 1, "b": 1.5, "c": true, "d": null, "e": "1"})
        );
    }

    #[test]
    fn yaml_1_1_booleans_resolve_like_kubevela() {
        // KubeVela reads manifests with go-yaml v2 (YAML 1.1): `yes` and `on` are booleans.
        let documents = parse_documents(FileId(0), "a: yes\nb: on\nc: True\nd: 0x10\n").unwrap();
        assert_eq!(
            documents[0].value,
            serde_json::json!({"a": true, "b": true, "c": true, "d": 16})
        );
    }

    #[test]
    fn syntax_errors_carry_their_position() {
        let text = "a: 1\nb: [1, 2\nc: 3\n";
        let error = parse_documents(FileId(0), text).unwrap_err();
        assert_eq!(error.message, "illegal placement of ':' indicator");
        assert_eq!(line_col(text, error.span), (3, 2));
    }
}
