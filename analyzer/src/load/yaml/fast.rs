//! The loader's fast path: `granit-parser` events (the parser under serde-saphyr) read directly
//! into `serde_json::Value` and [`Positions`], without serde-saphyr's spanned deserializer.
//!
//! It only takes the YAML that Kubernetes and KubeVela manifests are made of: block and flow
//! collections, quoted and block scalars, and plain scalars whose meaning is certain (null
//! words, YAML 1.1 booleans, canonical decimal integers, text that cannot be a number). For
//! anything else it gives up and [`super::parse_documents`] runs serde-saphyr on the whole file,
//! so results, positions and error messages stay exactly serde-saphyr's:
//! - a syntax error (serde-saphyr words and places its messages itself);
//! - anchors, aliases and tags (merge keys, replays, tag checks);
//! - plain scalars that could be floats, radix or signed-zero integers, or have odd spacing;
//! - mapping keys that are not plain text or quoted strings (`80:`, `true:`, `<<:`, `~:`,
//!   collections as keys), and keys repeated in a mapping (serde-saphyr's duplicate-key error);
//! - documents near serde-saphyr's default budget (depth 64, 250,000 nodes, 1,024 documents).
//!
//! Spans are the events' byte ranges, which is what serde-saphyr's `Spanned` reports for a node
//! that is not an alias (`tests` compare both paths on every YAML file in the repository).
//!
//! Before the events, a line scanner (`block.rs`) tries the file: plain block-style manifests
//! (every generated app) go straight from their lines into the same [`Builder`], with the
//! events' exact spans, and anything else it leaves to the events (`tests` compare the two
//! wherever the scanner answers, on the same files and on mutations of generated apps).

mod block;

use super::{NodeKind, NodeSpans, Positions, YamlDocument};
use cue::FileId;
use granit_parser::{Event, Parser, ScalarStyle};
use std::borrow::Cow;

/// Deepest collection nesting taken here; serde-saphyr's default budget stops at 64.
const MAX_DEPTH: usize = 48;
/// Most nodes (mapping keys included) per file taken here; serde-saphyr's default budget
/// allows 250,000 (and 1,000,000 events: at most two per node).
const MAX_NODES: usize = 200_000;
/// Most documents per file taken here, null ones included; serde-saphyr's default budget allows
/// 1,024.
const MAX_DOCUMENTS: usize = 1_000;
/// Largest file taken here: serde-saphyr's default budget allows 64 MiB of scalar text.
const MAX_BYTES: usize = 32 * 1024 * 1024;

/// The documents of `text` with their positions, null documents left out, or `None` when the
/// file needs serde-saphyr (see the module doc).
pub(super) fn parse_documents(file: FileId, text: &str) -> Option<Vec<YamlDocument>> {
    if text.len() > MAX_BYTES {
        return None;
    }
    block_path(file, text).or_else(|| event_path(file, text))
}

/// The documents as the line scanner reads them (`block.rs`), `None` when it gives up.
fn block_path(file: FileId, text: &str) -> Option<Vec<YamlDocument>> {
    let mut builder = Builder::new(file);
    block::parse_documents(text, &mut builder)?;
    builder.finish()
}

/// The documents as granit-parser's events give them, `None` when serde-saphyr must decide.
fn event_path(file: FileId, text: &str) -> Option<Vec<YamlDocument>> {
    let mut n_documents = 0usize;
    let mut builder = Builder::new(file);
    for item in Parser::new_from_str(text) {
        let (event, span) = item.ok()?;
        let range = (
            u32::try_from(span.start.byte_offset()?).ok()?,
            u32::try_from(span.end.byte_offset()?).ok()?,
        );
        match event {
            Event::StreamStart | Event::StreamEnd => {}
            Event::DocumentStart(..) => {
                n_documents += 1;
                if n_documents > MAX_DOCUMENTS {
                    return None;
                }
            }
            Event::DocumentEnd => builder.end_document()?,
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                builder.scalar(value, style, range)?;
            }
            Event::SequenceStart(_, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                builder.start(NodeKind::Seq, range)?;
            }
            Event::MappingStart(_, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                builder.start(NodeKind::Map, range)?;
            }
            Event::SequenceEnd | Event::MappingEnd => builder.end()?,
            // Comments are not data. The feature is on here because kube turns it on in every
            // binary that links it: without this arm every commented file would fall back.
            Event::Comment(..) => {}
            // Aliases and anything newer than this code: serde-saphyr decides.
            _ => return None,
        }
    }
    builder.finish()
}

/// A mapping key waiting for its value: its text and span.
type PendingKey = (String, (u32, u32));

/// A collection being filled. Its members so far wait in the builder's shared lists (from the
/// index it holds on), and the collection is made at its end with exactly their number: no
/// growth of each map's entries and hash table, or of each list, as members arrive (and no
/// spare capacity kept in every loaded document).
enum Collection {
    /// Items so far: `Builder::items[start..]`.
    Seq(usize),
    /// Entries so far: `Builder::entries[start..]`; and a key waiting for its value.
    Map(usize, Option<PendingKey>),
}

struct Frame {
    collection: Collection,
    node: usize,
}

struct Builder {
    file: FileId,
    documents: Vec<YamlDocument>,
    positions: Positions,
    stack: Vec<Frame>,
    /// The items of the open sequences, innermost last.
    items: Vec<serde_json::Value>,
    /// The entries of the open mappings, innermost last.
    entries: Vec<(String, serde_json::Value)>,
    /// The finished root node of the current document.
    root: Option<serde_json::Value>,
    n_nodes: usize,
}

impl Builder {
    fn new(file: FileId) -> Builder {
        Builder {
            file,
            documents: Vec::new(),
            positions: new_positions(file),
            stack: Vec::new(),
            items: Vec::new(),
            entries: Vec::new(),
            root: None,
            n_nodes: 0,
        }
    }

    /// The documents, once every collection and document is closed.
    fn finish(self) -> Option<Vec<YamlDocument>> {
        (self.stack.is_empty() && self.root.is_none()).then_some(self.documents)
    }

    /// A scalar event: a mapping key, or a value.
    /// `text` by value: quoted and block scalars arrive as owned strings, moved as they are.
    fn scalar(&mut self, text: Cow<'_, str>, style: ScalarStyle, range: (u32, u32)) -> Option<()> {
        if let Some(Frame {
            collection: Collection::Map(_, pending @ None),
            ..
        }) = self.stack.last_mut()
        {
            // Keys are nodes in serde-saphyr's budget too.
            self.n_nodes += 1;
            if self.n_nodes > MAX_NODES {
                return None;
            }
            key_text(&text, style)?;
            *pending = Some((text.into_owned(), range));
            return Some(());
        }
        let value = scalar_value(text, style)?;
        let node = self.push_node(range, NodeKind::Scalar)?;
        self.finish_node(node, value)
    }

    /// A collection starts: it must be a value (a collection as a mapping key needs
    /// serde-saphyr).
    fn start(&mut self, kind: NodeKind, range: (u32, u32)) -> Option<()> {
        if matches!(
            self.stack.last(),
            Some(Frame {
                collection: Collection::Map(_, None),
                ..
            })
        ) || self.stack.len() >= MAX_DEPTH
        {
            return None;
        }
        let collection = match kind {
            NodeKind::Seq => Collection::Seq(self.items.len()),
            NodeKind::Map => Collection::Map(self.entries.len(), None),
            NodeKind::Scalar => return None,
        };
        let node = self.push_node(range, kind)?;
        self.stack.push(Frame { collection, node });
        Some(())
    }

    /// The innermost collection ends.
    fn end(&mut self) -> Option<()> {
        let frame = self.stack.pop()?;
        let value = match frame.collection {
            // Collected from the drain: allocated with exactly the items' number.
            Collection::Seq(start) => {
                serde_json::Value::Array(self.items.drain(start.min(self.items.len())..).collect())
            }
            // A key without its value: the parser always pairs them, but be safe.
            Collection::Map(_, Some(_)) => return None,
            Collection::Map(start, None) => {
                let entries = self.entries.drain(start.min(self.entries.len())..);
                let mut object = serde_json::Map::with_capacity(entries.len());
                for (key, value) in entries {
                    // A repeated key is serde-saphyr's duplicate-key error (or, for keys that
                    // only read the same as JSON text, its own rule): let it decide.
                    if object.insert(key, value).is_some() {
                        return None;
                    }
                }
                serde_json::Value::Object(object)
            }
        };
        self.finish_node(frame.node, value)
    }

    /// Records a node that starts here, under the pending mapping key if any. Its `end` is set
    /// by [`Self::finish_node`].
    fn push_node(&mut self, range: (u32, u32), kind: NodeKind) -> Option<usize> {
        self.n_nodes += 1;
        if self.n_nodes > MAX_NODES || (self.stack.is_empty() && self.root.is_some()) {
            return None;
        }
        let positions = &mut self.positions;
        let (key, key_text) = match self.stack.last() {
            Some(Frame {
                collection: Collection::Map(_, Some((text, span))),
                ..
            }) => {
                let start = positions.keys.len() as u32;
                positions.keys.push_str(text);
                (Some(*span), (start, positions.keys.len() as u32))
            }
            _ => (None, (0, 0)),
        };
        let index = positions.nodes.len();
        positions.nodes.push(NodeSpans {
            key,
            value: range,
            key_text,
            end: 0,
            kind,
        });
        Some(index)
    }

    /// A node is complete: closes its span range and puts its value into its parent.
    fn finish_node(&mut self, node: usize, value: serde_json::Value) -> Option<()> {
        let end = self.positions.nodes.len() as u32;
        self.positions.nodes.get_mut(node)?.end = end;
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame {
                collection: Collection::Seq(_),
                ..
            }) => self.items.push(value),
            Some(Frame {
                collection: Collection::Map(_, pending),
                ..
            }) => {
                let (key, _) = pending.take()?;
                self.entries.push((key, value));
            }
        }
        Some(())
    }

    /// A document ends: kept unless its root is null, as serde-saphyr skips null documents.
    fn end_document(&mut self) -> Option<()> {
        if !self.stack.is_empty() {
            return None;
        }
        let positions = std::mem::replace(&mut self.positions, new_positions(self.file));
        match self.root.take() {
            None | Some(serde_json::Value::Null) => {}
            Some(value) => self.documents.push(YamlDocument { value, positions }),
        }
        Some(())
    }
}

fn new_positions(file: FileId) -> Positions {
    Positions {
        file,
        nodes: Vec::new(),
        keys: String::new(),
    }
}

/// A scalar value as serde-saphyr resolves an untagged scalar for `serde_json::Value`, or
/// `None` when only serde-saphyr can say (floats, other integer spellings).
///
/// serde-saphyr's order for a plain scalar (`deserialize_any`): the null words, then YAML 1.1
/// booleans (KubeVela reads manifests with go-yaml v2), then integers, then YAML 1.2 floats,
/// else text. Quoted and block scalars are always text.
fn scalar_value(text: Cow<'_, str>, style: ScalarStyle) -> Option<serde_json::Value> {
    if style != ScalarStyle::Plain {
        return Some(serde_json::Value::String(text.into_owned()));
    }
    let text = text.as_ref();
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Some(serde_json::Value::Null);
    }
    if let Some(boolean) = yaml11_bool(text) {
        return Some(serde_json::Value::Bool(boolean));
    }
    if is_plain_text(text) {
        return Some(serde_json::Value::String(text.to_owned()));
    }
    canonical_integer(text).map(serde_json::Value::Number)
}

/// The text of a mapping key, or `None` for keys serde-saphyr reads as something else first
/// (numbers, booleans, null, `<<` merges).
fn key_text(text: &str, style: ScalarStyle) -> Option<&str> {
    if text == "<<" {
        return None;
    }
    if style != ScalarStyle::Plain {
        return Some(text);
    }
    let is_text = !matches!(text, "" | "~" | "null" | "Null" | "NULL")
        && yaml11_bool(text).is_none()
        && is_plain_text(text);
    is_text.then_some(text)
}

/// serde-saphyr's YAML 1.1 booleans (`parse_yaml11_bool`), case-insensitive.
fn yaml11_bool(text: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "y", "on"];
    const FALSE: [&str; 4] = ["false", "no", "n", "off"];
    if TRUE.iter().any(|word| text.eq_ignore_ascii_case(word)) {
        Some(true)
    } else if FALSE.iter().any(|word| text.eq_ignore_ascii_case(word)) {
        Some(false)
    } else {
        None
    }
}

/// True for a plain scalar that no integer or float spelling can match. serde-saphyr's integer
/// parsers take a sign, digits, `_` and the `0x`/`0o`/`0b` radixes (hex digits included); Rust's
/// float parser, which it uses, takes a sign, digits, `.`, an exponent, and the `inf`,
/// `infinity` and `nan` words (which serde-saphyr then rejects as non-finite, keeping the text).
/// So text that does not start like a number (sign, digit or `.`), or holds any other character
/// (`100m`, `64Mi`, `25%`, `12:30`), is text. Surrounding whitespace, which serde-saphyr trims
/// before parsing, is left to serde-saphyr.
fn is_plain_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    let is_space = |byte: u8| matches!(byte, b' ' | b'\t' | b'\r' | b'\n');
    if is_space(first) || is_space(last) {
        return false;
    }
    let starts_like_a_number = first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.');
    !starts_like_a_number || bytes.iter().any(|byte| !may_be_in_a_number(*byte))
}

/// A byte some integer or float spelling can contain (see [`is_plain_text`]).
fn may_be_in_a_number(byte: u8) -> bool {
    byte.is_ascii_hexdigit()
        || matches!(
            byte.to_ascii_lowercase(),
            b'+' | b'-' | b'.' | b'_' | b'x' | b'o' | b'i' | b'n' | b't' | b'y'
        )
}

/// A decimal integer spelled canonically (no sign but `-`, no leading zero, no `-0`, at most
/// 18 digits so it fits both `i64` and `u64`), as serde-saphyr reads it; `None` otherwise.
fn canonical_integer(text: &str) -> Option<serde_json::Number> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    let canonical = !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && (!digits.starts_with('0') || (digits == "0" && !negative));
    if !canonical {
        return None;
    }
    let magnitude: i64 = digits.parse().ok()?;
    Some(if negative {
        serde_json::Number::from(-magnitude)
    } else {
        serde_json::Number::from(magnitude.unsigned_abs())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The fast path either gives up or returns exactly serde-saphyr's documents and positions;
    /// so does the line scanner in it, which must also equal the event path.
    fn assert_same_as_serde_saphyr(text: &str) -> bool {
        assert_block_path_agrees(text);
        let Some(fast) = parse_documents(FileId(7), text) else {
            return false;
        };
        let reference = super::super::lenient::parse_documents(FileId(7), text);
        assert_eq!(
            Ok(&fast),
            reference
                .as_ref()
                .map(|(documents, _)| documents)
                .map_err(|error| &error.message),
            "fast path differs from serde-saphyr on:\n{text}"
        );
        assert!(
            reference.is_ok_and(|(_, warnings)| warnings.is_empty()),
            "fast path took a file that needs go-yaml's leniency:\n{text}"
        );
        true
    }

    /// The line scanner either gives up or returns exactly the event path's documents and
    /// positions (which must then answer too); true when it answered.
    fn assert_block_path_agrees(text: &str) -> bool {
        let Some(block) = block_path(FileId(7), text) else {
            return false;
        };
        assert_eq!(
            Some(&block),
            event_path(FileId(7), text).as_ref(),
            "line scanner differs from the event path on:\n{text}"
        );
        true
    }

    fn yaml_files(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                yaml_files(&path, out);
            } else if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                out.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }

    /// xorshift64*, so a failing mutation reproduces.
    fn next(state: &mut u64) -> usize {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize
    }

    #[test]
    fn loadgen_and_golden_case_files_take_the_fast_path_with_identical_results() {
        let mut texts: Vec<String> = loadgen::generate(40, &loadgen::Options::default())
            .into_iter()
            .filter(|file| file.path.extension().is_some_and(|ext| ext == "yaml"))
            .map(|file| file.contents)
            .collect();
        let n_loadgen = texts.len();
        assert!(n_loadgen >= 40);
        yaml_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases"),
            &mut texts,
        );
        let taken: Vec<bool> = texts
            .iter()
            .map(|text| assert_same_as_serde_saphyr(text))
            .collect();
        // Every generated app is plain manifest YAML: none may fall back (the bench's figures
        // depend on it), and most hand-written cases take the fast path too.
        if let Some(index) = taken[..n_loadgen].iter().position(|taken| !*taken) {
            panic!("a loadgen file falls back:\n{}", texts[index]);
        }
        // ... and none leaves the line scanner (the bench's figures depend on it too).
        if let Some(text) = texts[..n_loadgen]
            .iter()
            .find(|text| block_path(FileId(7), text).is_none())
        {
            panic!("a loadgen file leaves the line scanner:\n{text}");
        }
        let n_fast = taken.iter().filter(|taken| **taken).count();
        assert!(
            n_fast * 10 >= texts.len() * 8,
            "{n_fast} of {}",
            texts.len()
        );
    }

    #[test]
    fn kubevela_files_agree_with_serde_saphyr_whenever_the_fast_path_answers() {
        // KubeVela's examples, definitions and fixtures: YAML written by other hands. The
        // folder is required, as in `tests/kubevela.rs`.
        let root = std::env::var_os("KUBEVELA").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/kubevela"),
            std::path::PathBuf::from,
        );
        let mut texts = Vec::new();
        yaml_files(&root, &mut texts);
        assert!(
            texts.len() > 100,
            "KubeVela folder not found at {}",
            root.display()
        );
        let n_fast = texts
            .iter()
            .filter(|text| assert_same_as_serde_saphyr(text))
            .count();
        assert!(n_fast * 2 > texts.len(), "{n_fast} of {}", texts.len());
        // The line scanner's comparison with the event path must run on many of them too.
        let n_block = texts
            .iter()
            .filter(|text| block_path(FileId(7), text).is_some())
            .count();
        assert!(n_block * 4 > texts.len(), "{n_block} of {}", texts.len());
    }

    #[test]
    fn mutated_files_agree_with_serde_saphyr_whenever_the_fast_path_answers() {
        let mut texts = Vec::new();
        yaml_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases"),
            &mut texts,
        );
        const SYNTAX: &[u8] = b"-:?,[]{}#&*!|>'\"%@`\n \t0.1~yn+";
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut n_fast = 0;
        for text in &texts {
            for _ in 0..12 {
                let mut bytes = text.as_bytes().to_vec();
                for _ in 0..1 + next(&mut state) % 3 {
                    let at = next(&mut state) % (bytes.len() + 1);
                    match next(&mut state) % 4 {
                        0 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        1 => bytes.insert(at, SYNTAX[next(&mut state) % SYNTAX.len()]),
                        2 => bytes.insert(at, b' '),
                        _ => bytes.truncate(at.max(bytes.len() / 2)),
                    }
                }
                if let Ok(mutated) = String::from_utf8(bytes) {
                    n_fast += usize::from(assert_same_as_serde_saphyr(&mutated));
                }
            }
        }
        // The comparison must have run on many mutants, not only on fallbacks.
        assert!(n_fast > 100, "{n_fast}");
    }

    #[test]
    fn mutated_loadgen_files_agree_with_the_event_path_whenever_the_line_scanner_answers() {
        // Block-style manifests with one to three edits at random places, the line scanner's
        // own ground: each answer must be the event path's (and serde-saphyr's).
        let texts: Vec<String> = loadgen::generate(60, &loadgen::Options::default())
            .into_iter()
            .map(|file| file.contents)
            .collect();
        const SYNTAX: &[u8] = b"-:?,[]{}#&*!|>'\"%@`\n \t0.1~yn+";
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let (mut n_block, mut n_mutants) = (0, 0);
        for text in &texts {
            for _ in 0..40 {
                let mut bytes = text.as_bytes().to_vec();
                for _ in 0..1 + next(&mut state) % 3 {
                    let at = next(&mut state) % (bytes.len() + 1);
                    match next(&mut state) % 5 {
                        0 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        1 => bytes.insert(at, SYNTAX[next(&mut state) % SYNTAX.len()]),
                        2 => bytes.insert(at, b' '),
                        3 => bytes.splice(at..at, *b"\n  - ").for_each(drop),
                        _ => bytes.truncate(at.max(bytes.len() / 2)),
                    }
                }
                if let Ok(mutated) = String::from_utf8(bytes) {
                    n_mutants += 1;
                    n_block += usize::from(assert_block_path_agrees(&mutated));
                    assert_same_as_serde_saphyr(&mutated);
                }
            }
        }
        // Most mutants stay in the scanner's subset: the comparison ran, not only fallbacks.
        assert!(n_block * 4 > n_mutants, "{n_block} of {n_mutants}");
    }

    #[test]
    fn plain_scalars_and_keys_resolve_like_serde_saphyr_or_fall_back() {
        let scalars = [
            "",
            "~",
            "null",
            "Null",
            "NULL",
            "nULL",
            "true",
            "True",
            "TRUE",
            "yes",
            "Yes",
            "y",
            "Y",
            "n",
            "no",
            "on",
            "ON",
            "off",
            "false",
            "0",
            "1",
            "-1",
            "-0",
            "007",
            "+5",
            "123456789012345678",
            "1234567890123456789",
            "99999999999999999999",
            "1.5",
            "1e3",
            ".5",
            "-.inf",
            ".nan",
            ".inf",
            "inf",
            "nan",
            "Infinity",
            "NaN",
            "0x1F",
            "0o17",
            "0b11",
            "1_000",
            "12:30",
            "1.2.3",
            "v1.2",
            "/healthz",
            "nginx:1.21",
            "a b",
            "-",
            "--x",
            "e5",
            "E",
            "~x",
            "x~",
            "=",
            "<<",
            "100m",
            "64Mi",
            "0.5Gi",
            "25%",
            "1e",
            "1_0",
            "0xg",
            "-inf",
            "+nan",
            "1.",
            "-.5e-3",
            "0 1",
            "1,5",
            "12h",
            "日本",
        ];
        for scalar in scalars {
            assert_same_as_serde_saphyr(&format!("v: {scalar}\n"));
            assert_same_as_serde_saphyr(&format!("- {scalar}\n"));
            assert_same_as_serde_saphyr(&format!("{scalar}: v\n"));
            assert_same_as_serde_saphyr(&format!("'{scalar}': v\nx: \"{scalar}\"\n"));
        }
        // The cases the fast path must take, with their values.
        let documents = parse_documents(FileId(0), "a: yes\nb: 80\nc: -3\nd: ~\ne: '1'\n").unwrap();
        assert_eq!(
            documents[0].value,
            serde_json::json!({"a": true, "b": 80, "c": -3, "d": null, "e": "1"})
        );
    }

    #[test]
    fn line_scanner_takes_block_style_and_leaves_the_rest() {
        // Each must be taken by the line scanner, with the event path's values and spans
        // (block collections start at their first key or dash, indentless sequences at their
        // first item's text, flow collections at their bracket).
        let taken = [
            "a: 1\n",
            "# c\n\na: x   # trailing\nb: \"q\"\nc: 'it''s'\n",
            "a:\n- x\n- y\nb:\n  - x\n  -   k: v\n      j: w\n  -\n    m: n\n",
            "\"q k\": {a: x, \"b\": [c, 'd'], e: {}}\nf: []\n",
            "---\na: 1\n---\n---\nb: [\"--tag=x\", -v]\n",
            "list:\n  - name: a\n    items:\n    - 1\n    - -2\n  - name: b\n",
            "k:\n  # comment\n  url: http://x:80/y # c\nz: a#b\n",
            "a:\n  -\n    - x\n",
        ];
        for text in taken {
            assert!(assert_block_path_agrees(text), "not taken:\n{text}");
            assert!(assert_same_as_serde_saphyr(text));
        }
        // Each must be left to the event path (which then decides, or serde-saphyr).
        let left = [
            "a: |\n  text\n",
            "a: &x 1\nb: *x\n",
            "a: plain\n  continued\n",
            "a:\nb: 1\n",
            "a: b: c\n",
            "a: \"esc\\t\"\n",
            "- x\n",
            "a: [x,\n  y]\n",
            "a: [x, y,]\n",
            "\ta: 1\n",
            "a: 1\r\n",
            "a: ü\n",
            "...\n",
            "a: 1\n...\n",
            "--- a\n",
            "a :\n",
            "a: - x\n",
            "a:\n- - x\n",
            "a: 1.5\n",
            "80: x\n",
        ];
        for text in left {
            assert!(!assert_block_path_agrees(text), "taken:\n{text}");
            assert_same_as_serde_saphyr(text);
        }
    }

    #[test]
    fn structures_agree_or_fall_back() {
        let texts = [
            "",
            "---\n",
            "# only a comment\n",
            "---\n---\na: 1\n...\n---\n~\n---\n- x\n",
            "a: {b: [1, {c: d}], e: []}\nf: {}\n",
            "a:\n  - b: 1\n    c:\n    - - x\n      - y\n",
            "a: |\n  line\n  two\nb: >-\n  folded\n  text\n",
            "a: &x 1\nb: *x\n",
            "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",
            "a: !!str 1\n",
            "a: 1\na: 2\n",
            // Repeated keys inside nested and flow mappings, found when the mapping ends.
            "a:\n  b: 1\n  c: [1, 2]\n  b: {x: 1}\nd: 2\n",
            "a: {b: 1, b: 2}\n",
            "- x\n- {k: 1, j: [2], k: 3}\n",
            "80: x\n\"80\": y\n",
            "? [a, b]\n: c\n",
            "? a\n: b\n",
            "a: [1, 2\n",
            "a:\n- 1\n b: 2\n",
            "\"multi\n  line\": x\n",
            "plain\n  multi line: x\n",
            "a: plain\n  continued\n",
            "k: \"tab\\there\"\n",
            "\u{feff}a: 1\n",
            "a: 1 # comment\n# c\nb: 2\n",
            "ü: é\nx: 日本\n",
        ];
        for text in texts {
            assert_same_as_serde_saphyr(text);
        }
        // Near serde-saphyr's budgets the file goes to it, which enforces them: many (even
        // null) documents, many keys, deep nesting.
        assert!(parse_documents(FileId(0), &"---\n".repeat(1_001)).is_none());
        let keys: String = (0..100_001).map(|index| format!("k{index}: v\n")).collect();
        assert!(parse_documents(FileId(0), &keys).is_none());
        assert!(parse_documents(FileId(0), &keys[..keys.len() / 2]).is_some());
        let deep = format!("{}1{}", "[".repeat(60), "]".repeat(60));
        assert!(parse_documents(FileId(0), &deep).is_none());
    }
}
