//! YAML documents loaded with positions: each document becomes a `serde_json::Value` plus
//! [`Positions`], which finds the span of the key and of the value at a JSON-pointer path.
//!
//! serde-saphyr does the YAML work (scalar resolution, anchors, multi-document streams); a
//! recursive visitor wraps every node in `serde_saphyr::Spanned` so that one pass yields both
//! the data and where each piece of it came from. Most manifests take the fast path first
//! (`fast.rs`: the parser's events read directly, same results), which hands anything unusual
//! back to serde-saphyr.
//!
//! What go-yaml (KubeVela's reader) accepts beyond the YAML spec is read too, with a
//! [`YamlWarning`]: a key repeated in a mapping (the last value wins, as in KubeVela) and, in
//! `lenient.rs`, a quoted scalar's continuation line indented less than its mapping requires.

mod fast;
mod lenient;

use cue::{FileId, Span};
use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// One YAML document with its positions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YamlDocument {
    pub(crate) value: serde_json::Value,
    pub(crate) positions: Positions,
}

/// Where a file departs from the YAML spec in a way go-yaml reads anyway.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YamlWarning {
    pub(crate) message: String,
    pub(crate) span: Span,
}

/// A YAML error with its position.
#[derive(Debug, Clone)]
pub(crate) struct YamlError {
    pub(crate) message: String,
    pub(crate) span: Span,
}

/// Where every node of one document sits, looked up by JSON-pointer path
/// (`/spec/components/1/properties/image`).
///
/// Compact on purpose: loading records the spans of every node of every file, but diagnostics
/// ask for a handful. So the nodes are one flat vector in document order (a node's
/// descendants follow it, up to its `end`), the mapping keys one string arena, and a lookup
/// walks the path through the children: no allocation per node, none per lookup.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Positions {
    file: FileId,
    nodes: Vec<NodeSpans>,
    /// The mapping keys, back to back; a node's `key_text` is a range of it.
    keys: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct NodeSpans {
    /// The key of a mapping entry; `None` for sequence elements and the root.
    key: Option<(u32, u32)>,
    value: (u32, u32),
    /// Byte range of the mapping key's text in `Positions::keys` (empty otherwise).
    key_text: (u32, u32),
    /// Index one past this node's last descendant.
    end: u32,
    kind: NodeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeKind {
    Scalar,
    Seq,
    Map,
}

impl Positions {
    /// The span of the value at `pointer`, or of its nearest ancestor that has one.
    pub(crate) fn value_span(&self, pointer: &str) -> Span {
        self.find(pointer)
            .0
            .map_or(Span::new(self.file, 0, 0), |node| {
                Span::new(self.file, node.value.0, node.value.1)
            })
    }

    /// The span of the key at `pointer` (the value's span for sequence elements), or of the
    /// nearest ancestor.
    pub(crate) fn key_span(&self, pointer: &str) -> Span {
        self.find(pointer)
            .0
            .map_or(Span::new(self.file, 0, 0), |node| {
                let (start, end) = node.key.unwrap_or(node.value);
                Span::new(self.file, start, end)
            })
    }

    /// The file these positions are in.
    pub(crate) fn file(&self) -> FileId {
        self.file
    }

    /// True when the exact path was present in the document.
    pub(crate) fn contains(&self, pointer: &str) -> bool {
        matches!(self.find(pointer), (Some(_), true))
    }

    /// The node at `pointer`, or its nearest ancestor present in the document, and whether the
    /// whole path was found.
    fn find(&self, pointer: &str) -> (Option<&NodeSpans>, bool) {
        let Some(mut current) = self.nodes.first().map(|_| 0usize) else {
            return (None, false);
        };
        if pointer.is_empty() {
            return (self.nodes.get(current), true);
        }
        // A pointer is "" or starts with '/'; anything else names no node below the root.
        let Some(rest) = pointer.strip_prefix('/') else {
            return (self.nodes.get(current), false);
        };
        for segment in rest.split('/') {
            match self.child(current, segment) {
                Some(child) => current = child,
                None => return (self.nodes.get(current), false),
            }
        }
        (self.nodes.get(current), true)
    }

    /// The index of the child of node `parent` named by one pointer segment (still escaped).
    fn child(&self, parent: usize, segment: &str) -> Option<usize> {
        let node = self.nodes.get(parent)?;
        let end = node.end as usize;
        let mut child = parent + 1;
        match node.kind {
            NodeKind::Scalar => None,
            NodeKind::Seq => {
                // Only the canonical spelling of an index names an element (`01` does not).
                let index: usize = segment.parse().ok()?;
                if segment != index.to_string() {
                    return None;
                }
                for _ in 0..index {
                    child = self.nodes.get(child)?.end as usize;
                }
                (child < end).then_some(child)
            }
            NodeKind::Map => {
                while child < end {
                    let entry = self.nodes.get(child)?;
                    let (start, stop) = entry.key_text;
                    let key = self.keys.get(start as usize..stop as usize)?;
                    if segment_matches(segment, key) {
                        return Some(child);
                    }
                    child = entry.end as usize;
                }
                None
            }
        }
    }
}

/// True when an escaped pointer segment (RFC 6901: `~1` is `/`, `~0` is `~`) names `key`.
fn segment_matches(segment: &str, key: &str) -> bool {
    if !segment.contains('~') {
        return segment == key;
    }
    segment.replace("~1", "/").replace("~0", "~") == key
}

/// Escapes one path segment for a JSON pointer (RFC 6901).
pub(crate) fn escape_segment(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Parses every document of a YAML stream. Null documents (empty, or only comments) are
/// skipped. A syntax error anywhere fails the whole file: serde-saphyr stops at the first.
#[cfg(test)]
pub(crate) fn parse_documents(file: FileId, text: &str) -> Result<Vec<YamlDocument>, YamlError> {
    parse_documents_with_warnings(file, text).map(|(documents, _)| documents)
}

/// [`parse_documents`], with where the file relies on go-yaml's leniency.
pub(crate) fn parse_documents_with_warnings(
    file: FileId,
    text: &str,
) -> Result<(Vec<YamlDocument>, Vec<YamlWarning>), YamlError> {
    match fast::parse_documents(file, text) {
        Some(documents) => Ok((documents, Vec::new())),
        None => lenient::parse_documents(file, text),
    }
}

/// See [`super::yaml_fast_path_mismatch`].
pub(crate) fn fast_path_mismatch(text: &str) -> Option<String> {
    let fast = fast::parse_documents(FileId(0), text)?;
    let reference = lenient::parse_documents(FileId(0), text);
    match reference {
        Ok((documents, warnings)) if documents == fast && warnings.is_empty() => None,
        Ok((documents, warnings)) if documents == fast => {
            Some(format!("fast path took a file with warnings: {warnings:?}"))
        }
        Ok((documents, _)) => Some(format!("fast path: {fast:?}\nserde-saphyr: {documents:?}")),
        Err(error) => Some(format!(
            "fast path: {fast:?}\nserde-saphyr: error {}",
            error.message
        )),
    }
}

/// [`parse_documents`] by serde-saphyr alone, repeated keys kept last with a warning each.
fn parse_documents_with_serde_saphyr(
    file: FileId,
    text: &str,
) -> Result<(Vec<YamlDocument>, Vec<YamlWarning>), YamlError> {
    let mut options = cue::yaml_options(text);
    // Every entry reaches the visitor, which keeps the last of repeated keys as go-yaml does.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    let nodes: Vec<Node> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|error| {
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
    let mut warnings = Vec::new();
    let documents = nodes
        .into_iter()
        .filter(|node| !matches!(node.value, NodeValue::Null))
        .map(|node| {
            let mut positions = Positions {
                file,
                nodes: Vec::new(),
                keys: String::new(),
            };
            let root_span = range_of(&node.location);
            let mut repeated_keys = Vec::new();
            let value = value_into_json(
                node.value,
                None,
                root_span,
                &mut positions,
                &mut repeated_keys,
            );
            warnings.extend(repeated_keys.into_iter().map(|(key, span)| YamlWarning {
                message: format!(
                    "mapping key `{key}` is repeated; the last value is used, as KubeVela \
                     (go-yaml) does: remove this one"
                ),
                span: Span::new(file, span.0, span.1),
            }));
            YamlDocument { value, positions }
        })
        .collect();
    Ok((documents, warnings))
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
    match without_position.strip_prefix("budget breached: ") {
        Some(breach) => budget_message(breach),
        None => without_position.to_owned(),
    }
}

/// serde-saphyr's reading limits (`Nodes { nodes: 250001 }`) in words: a file over them (an
/// alias bomb expands to millions of nodes) is refused whole before it can fill memory.
fn budget_message(breach: &str) -> String {
    let (limit, detail) = breach.split_once(' ').unwrap_or((breach, ""));
    let what = match limit {
        "Nodes" => "nodes",
        "Events" => "YAML events",
        "Aliases" => "aliases",
        "Anchors" => "anchors",
        "Depth" | "InclusionDepth" => "levels of nesting",
        "Documents" => "documents",
        "ScalarBytes" => "bytes of scalars",
        "CommentBytes" => "bytes of comments",
        "MergeKeys" => "merge keys",
        "InputBytes" => "bytes",
        // Limits of two numbers or none (`AliasAnchorRatio`, `SequenceUnbalanced`).
        _ => {
            return format!(
                "the file is over a limit of what the loader reads from one file ({breach}); it \
                 is not read: remove repeated aliases or split the file"
            );
        }
    };
    let count: String = detail
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    format!(
        "the file reaches {count} {what} with its aliases expanded, more than the loader reads \
         from one file ({limit}); it is not read: remove repeated aliases or split the file"
    )
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

/// Byte range of a location's span (empty at 0 when serde-saphyr has no offset).
fn range_of(location: &serde_saphyr::Location) -> (u32, u32) {
    let span = location.span();
    let start = span.byte_offset().unwrap_or(0) as u32;
    let len = span.byte_len().unwrap_or(0) as u32;
    (start, start + len)
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

/// Converts a node to JSON, recording it and its descendants in `positions` in document order.
/// `key` is the node's mapping key: its span and its text. A mapping key repeated later in its
/// mapping is left out and added to `repeated_keys` (its text and span).
fn value_into_json(
    value: NodeValue,
    key: Option<((u32, u32), &str)>,
    span: (u32, u32),
    positions: &mut Positions,
    repeated_keys: &mut Vec<(String, (u32, u32))>,
) -> serde_json::Value {
    let index = positions.nodes.len();
    let key_text = key.map_or((0, 0), |(_, text)| {
        let start = positions.keys.len() as u32;
        positions.keys.push_str(text);
        (start, positions.keys.len() as u32)
    });
    let kind = match value {
        NodeValue::Seq(_) => NodeKind::Seq,
        NodeValue::Map(_) => NodeKind::Map,
        _ => NodeKind::Scalar,
    };
    positions.nodes.push(NodeSpans {
        key: key.map(|(span, _)| span),
        value: span,
        key_text,
        end: 0,
        kind,
    });
    let json = match value {
        NodeValue::Null => serde_json::Value::Null,
        NodeValue::Bool(b) => serde_json::Value::Bool(b),
        NodeValue::Number(n) => serde_json::Value::Number(n),
        NodeValue::String(s) => serde_json::Value::String(s),
        NodeValue::Seq(items) => serde_json::Value::Array(
            items
                .into_iter()
                .map(|item| {
                    let item_span = range_of(&item.referenced);
                    value_into_json(item.value, None, item_span, positions, repeated_keys)
                })
                .collect(),
        ),
        NodeValue::Map(entries) => {
            let mut object = serde_json::Map::with_capacity(entries.len());
            // go-yaml v2 (through sigs.k8s.io/yaml) keeps the last value of a repeated key.
            let mut later_keys = std::collections::HashSet::new();
            let repeated: Vec<bool> = entries
                .iter()
                .rev()
                .map(|(entry_key, _)| !later_keys.insert(entry_key.value.clone()))
                .collect();
            for ((entry_key, entry_value), repeated) in
                entries.into_iter().zip(repeated.into_iter().rev())
            {
                let key_span = range_of(&entry_key.referenced);
                if repeated {
                    repeated_keys.push((entry_key.value, key_span));
                    continue;
                }
                let value_span = range_of(&entry_value.referenced);
                let child = value_into_json(
                    entry_value.value,
                    Some((key_span, &entry_key.value)),
                    value_span,
                    positions,
                    repeated_keys,
                );
                object.insert(entry_key.value, child);
            }
            serde_json::Value::Object(object)
        }
    };
    let end = positions.nodes.len() as u32;
    if let Some(node) = positions.nodes.get_mut(index) {
        node.end = end;
    }
    json
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
    fn an_alias_bomb_is_refused_in_words() {
        // Nine levels of nine aliases each: 387 million strings once expanded.
        let mut text = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for (name, previous) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().zip('a'..) {
            let items = vec![format!("*{previous}"); 9].join(", ");
            text.push_str(&format!("{name}: &{name} [{items}]\n"));
        }
        let error = parse_documents(FileId(0), &text).unwrap_err();
        assert!(
            error.message.starts_with("the file reaches ")
                && error
                    .message
                    .contains(" 250001 nodes with its aliases expanded")
                && error
                    .message
                    .ends_with("remove repeated aliases or split the file"),
            "{}",
            error.message
        );
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

    /// go-yaml reads a long run of comments where the parser looks ahead; serde-saphyr's default
    /// budget stopped at 32 ("too many buffered comments"). Both loaders must read it: the
    /// anchor sends the file to serde-saphyr, the fuzzer's input went through the fast path.
    #[test]
    fn long_comment_runs_are_read_by_both_loaders() {
        let comments: String = (0..200).map(|i| format!("  # note {i}\n")).collect();
        let app = format!(
            "kind: Application\nspec:\n{comments}  components:\n{comments}  - name: web\n    \
             properties: {{image: &image nginx}}\n"
        );
        let documents = parse_documents(FileId(0), &app).unwrap();
        assert_eq!(
            documents[0].value["spec"]["components"][0]["properties"]["image"],
            "nginx"
        );
        let fuzzed = "aompone.ts:\n    type:aompone.ts:\n #\n#\n#\n#|\n##\n#\n#\n#|\n#\n\n\n\n#\n\n\n\n#\n\n#\n#\n#\n#|\n##\n#\n#\n#|\n#\n\n#\n\n\n\n#\n\n#\n#\n#\n#|\n##\n#pone.ts:\n #\n#\n#\n#|\n##\n#\n#\n#|\n#\n\n\n\n#\n\n\n\n#\n\n#\n#\n#\n#|\n##\n#\n#\n#|   - #   \n     ervice";
        assert_eq!(fast_path_mismatch(fuzzed), None);
        let documents = parse_documents_with_serde_saphyr(FileId(0), fuzzed)
            .unwrap()
            .0;
        assert_eq!(
            documents[0].value["aompone.ts"]["type:aompone.ts"],
            "ervice"
        );
    }

    #[test]
    fn lookups_walk_keys_indexes_and_escapes() {
        let text = "a/b: 1\n\"t~x\": 2\n80: {x: [q, [r, s]]}\nlist:\n- 0\n- k: v\n";
        let doc = parse_documents(FileId(1), text).unwrap().remove(0);
        let positions = &doc.positions;
        assert_eq!(line_col(text, positions.key_span("/a~1b")), (1, 1));
        assert_eq!(line_col(text, positions.value_span("/t~0x")), (2, 8));
        assert_eq!(line_col(text, positions.value_span("/80/x/1/1")), (3, 17));
        assert_eq!(line_col(text, positions.value_span("/list/1/k")), (6, 6));
        assert!(positions.contains("/list/1/k"));
        assert!(positions.contains(""));
        // Not present: a later sibling, a non-canonical index, a path below a scalar, a key
        // that only matches once unescaped differently.
        for missing in ["/list/2", "/list/01", "/a~1b/c", "/a/b", "/80/x/1/1/0"] {
            assert!(!positions.contains(missing), "{missing}");
        }
        // ... each falls back to its nearest present ancestor.
        assert_eq!(
            positions.value_span("/list/2"),
            positions.value_span("/list")
        );
        assert_eq!(
            positions.value_span("/80/x/1/1/0"),
            positions.value_span("/80/x/1/1")
        );
        assert_eq!(positions.value_span("/a/b"), positions.value_span(""));
        // Sequence elements have no key: their key span is their value span.
        assert_eq!(
            positions.key_span("/list/0"),
            positions.value_span("/list/0")
        );
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
