//! The loader's quickest path: a line scanner for the block-style YAML that manifests are
//! written in, feeding the same [`Builder`] as the event path, without granit-parser's
//! tokenizer (its events were ~84 % of a generated manifest's YAML step).
//!
//! It takes only text whose meaning and spans it knows exactly, and gives up (`None`; the
//! caller runs the event path on the whole file) on anything else:
//! - bytes outside printable ASCII, tabs, carriage returns (other line breaks and
//!   indentation rules);
//! - directives, `...`, and `---` lines with anything after the marker;
//! - block scalars (`|`, `>`), anchors, aliases, tags, complex keys (`?`), plain scalars that
//!   continue on the next line, quoted scalars with escapes or over several lines;
//! - empty values (`key:` with nothing below), a sequence nested on the dash's line
//!   (`- - x`), a root that is not a block mapping;
//! - flow collections over several lines, with comments, empty or trailing entries, or plain
//!   scalars holding `:`.
//!
//! Every event it feeds carries the span granit-parser gives the same node (block collections
//! start, empty, at their first key or dash; an indentless sequence, `key:` then `- x` at the
//! key's indentation, at its first item's text). `fast.rs`'s tests compare this path with the
//! event path on every file that both take.

use super::{Builder, Collection, MAX_DOCUMENTS, NodeKind};
use granit_parser::ScalarStyle;
use std::borrow::Cow;

/// The longest implicit key YAML allows (YAML 1.2 §7.4.2: 1,024 characters).
const MAX_KEY: usize = 1024;

/// Feeds `builder` with every document of `text`, or `None` when the file needs the event
/// path (see the module doc).
pub(super) fn parse_documents(text: &str, builder: &mut Builder) -> Option<()> {
    let bytes = text.as_bytes();
    // Per chunk without an early exit, so the check compiles to vector code (it reads every
    // byte of every file: one byte at a time it was ~6 % of the scanner's instructions).
    let outside = |byte: u8| byte != b'\n' && !(b' '..=b'~').contains(&byte);
    if bytes.chunks(64).any(|chunk| {
        chunk
            .iter()
            .fold(false, |found, &byte| found | outside(byte))
    }) {
        return None;
    }
    let mut scanner = Scanner {
        bytes,
        text,
        line: Line::first(bytes),
        builder,
    };
    scanner.skip_to_content();
    let mut n_documents = 0usize;
    loop {
        if scanner.at_document_marker()? {
            scanner.advance();
            scanner.skip_to_content();
            n_documents += 1;
            if n_documents > MAX_DOCUMENTS {
                return None;
            }
            continue;
        }
        if scanner.line.is_none() {
            return Some(());
        }
        n_documents += 1;
        if n_documents > MAX_DOCUMENTS {
            return None;
        }
        // The root: a block mapping at column 0, and after it a marker or the end.
        let line = scanner.line?;
        if line.indent != 0 || !scanner.is_key_at(line.content) {
            return None;
        }
        scanner.mapping(line.content, 0)?;
        if let Some(line) = scanner.line
            && !scanner.is_document_marker(line)?
        {
            return None;
        }
        scanner.builder.end_document()?;
    }
}

/// One line of the text: where it starts, its indentation, where its text starts and ends
/// (before the `\n`).
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    indent: usize,
    content: usize,
    end: usize,
}

impl Line {
    fn first(bytes: &[u8]) -> Option<Line> {
        Line::at(bytes, 0)
    }

    /// The line starting at `start`, `None` past the end.
    fn at(bytes: &[u8], start: usize) -> Option<Line> {
        if start >= bytes.len() {
            return None;
        }
        let rest = bytes.get(start..)?;
        let end = rest
            .iter()
            .position(|&byte| byte == b'\n')
            .map_or(bytes.len(), |offset| start + offset);
        let indent = rest
            .iter()
            .take(end - start)
            .take_while(|&&byte| byte == b' ')
            .count();
        Some(Line {
            start,
            indent,
            content: start + indent,
            end,
        })
    }

    /// Only spaces, or a comment.
    fn is_blank(&self, bytes: &[u8]) -> bool {
        self.content == self.end || bytes.get(self.content) == Some(&b'#')
    }
}

struct Scanner<'t, 'b> {
    bytes: &'t [u8],
    text: &'t str,
    /// The current line; `None` at the end of the text.
    line: Option<Line>,
    builder: &'b mut Builder,
}

impl<'t> Scanner<'t, '_> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// To the next line.
    fn advance(&mut self) {
        self.line = self
            .line
            .and_then(|line| Line::at(self.bytes, line.end + 1));
    }

    /// From the current line to the first that is neither blank nor a comment.
    fn skip_to_content(&mut self) {
        while let Some(line) = self.line {
            if !line.is_blank(self.bytes) {
                return;
            }
            self.advance();
        }
    }

    /// To the next line with content.
    fn next_content(&mut self) {
        self.advance();
        self.skip_to_content();
    }

    fn at_document_marker(&self) -> Option<bool> {
        match self.line {
            Some(line) => self.is_document_marker(line),
            None => Some(false),
        }
    }

    /// True for a `---` line; `None` for the markers and directives left to the event path
    /// (`--- text`, `...`, `%`).
    fn is_document_marker(&self, line: Line) -> Option<bool> {
        if line.indent != 0 {
            return Some(false);
        }
        let text = self.bytes.get(line.start..line.end)?;
        if text.starts_with(b"%") || text.starts_with(b"...") {
            return None;
        }
        if !text.starts_with(b"---") {
            return Some(false);
        }
        match text.get(3) {
            None => Some(true),
            Some(b' ') => text.iter().all(|&byte| byte == b' ').then_some(true),
            // `---x` is a plain scalar.
            Some(_) => Some(false),
        }
    }

    /// True when a mapping entry (`key:` followed by a space or the end of the line) starts
    /// at `at`. Whether the key is one this path takes is decided by [`Self::key`].
    fn is_key_at(&self, at: usize) -> bool {
        let end = self.line.map_or(at, |line| line.end);
        match self.byte(at) {
            Some(quote @ (b'"' | b'\'')) => {
                let Some(close) = self.closing_quote(at, end, quote) else {
                    return false;
                };
                self.byte(close + 1) == Some(b':')
                    && matches!(self.byte(close + 2), None | Some(b' ' | b'\n'))
            }
            Some(_) => self.plain_key_end(at, end).is_some(),
            None => false,
        }
    }

    /// The index of the `:` that ends a plain key starting at `at`, if the line has one
    /// before a comment.
    fn plain_key_end(&self, at: usize, end: usize) -> Option<usize> {
        let mut index = at;
        while index < end {
            match self.byte(index)? {
                b':' if matches!(self.byte(index + 1), None | Some(b' ' | b'\n')) => {
                    return Some(index);
                }
                b'#' if index > at && self.byte(index - 1) == Some(b' ') => return None,
                _ => {}
            }
            index += 1;
        }
        None
    }

    /// The index of the quote closing a quoted scalar opened at `at`, on the same line; `None`
    /// without one or with a backslash in a double-quoted scalar (escapes: the event path).
    fn closing_quote(&self, at: usize, end: usize, quote: u8) -> Option<usize> {
        let mut index = at + 1;
        while index < end {
            let byte = self.byte(index)?;
            if quote == b'"' && byte == b'\\' {
                return None;
            }
            if byte == quote {
                // `''` inside a single-quoted scalar is one quote.
                if quote == b'\'' && self.byte(index + 1) == Some(b'\'') {
                    index += 2;
                    continue;
                }
                return Some(index);
            }
            index += 1;
        }
        None
    }

    /// A quoted scalar at `at` closing on this line: its text, style and the index after it.
    fn quoted(&self, at: usize, end: usize) -> Option<(Cow<'t, str>, ScalarStyle, usize)> {
        let quote = self.byte(at)?;
        let close = self.closing_quote(at, end, quote)?;
        let inner = self.text.get(at + 1..close)?;
        if quote == b'"' {
            Some((Cow::Borrowed(inner), ScalarStyle::DoubleQuoted, close + 1))
        } else if inner.contains("''") {
            Some((
                Cow::Owned(inner.replace("''", "'")),
                ScalarStyle::SingleQuoted,
                close + 1,
            ))
        } else {
            Some((Cow::Borrowed(inner), ScalarStyle::SingleQuoted, close + 1))
        }
    }

    /// A mapping key at `at`: feeds it, returns the index after its `:`.
    fn key(&mut self, at: usize) -> Option<usize> {
        let end = self.line?.end;
        let (text, style, after) = match self.byte(at)? {
            b'"' | b'\'' => self.quoted(at, end)?,
            first => {
                if is_indicator(first) {
                    return None;
                }
                let colon = self.plain_key_end(at, end)?;
                // `key :` (spaces before the colon) has a span without them: the event path.
                if colon == at || self.byte(colon - 1) == Some(b' ') {
                    return None;
                }
                (
                    Cow::Borrowed(self.text.get(at..colon)?),
                    ScalarStyle::Plain,
                    colon,
                )
            }
        };
        if after - at > MAX_KEY || self.byte(after) != Some(b':') {
            return None;
        }
        self.builder.scalar(text, style, span(at, after))?;
        Some(after + 1)
    }

    /// A block mapping whose first key starts at `at`, its keys at column `indent`. Leaves
    /// the scanner on the first content line after it.
    fn mapping(&mut self, at: usize, indent: usize) -> Option<()> {
        self.builder.start(NodeKind::Map, span(at, at))?;
        let mut key_at = at;
        loop {
            let after_key = self.key(key_at)?;
            self.value_after(after_key, indent)?;
            match self.line {
                Some(line) if line.indent == indent && !self.is_document_marker(line)? => {
                    key_at = line.content;
                }
                Some(line) if line.indent > indent => return None,
                _ => break,
            }
        }
        self.builder.end()
    }

    /// The value of a mapping entry or sequence item whose indicator ends before `from`, in a
    /// collection at column `indent`: on this line, or the block below. Leaves the scanner on
    /// the first content line after it.
    fn value_after(&mut self, from: usize, indent: usize) -> Option<()> {
        let line = self.line?;
        let at = self.skip_spaces(from, line.end);
        if at == line.end || self.byte(at) == Some(b'#') {
            if at < line.end && at == from {
                // `key:#` is not a comment.
                return None;
            }
            self.next_content();
            let below = self.line?;
            if self.is_document_marker(below)? {
                return None;
            }
            let is_dash = self.is_dash(below.content);
            if below.indent > indent {
                if is_dash {
                    return self.sequence(below.content, below.indent, false);
                }
                if self.is_key_at(below.content) {
                    return self.mapping(below.content, below.indent);
                }
                return None;
            }
            // `key:` and then `- x` at the key's column: an indentless sequence.
            if below.indent == indent && is_dash && self.in_mapping_entry() {
                return self.sequence(below.content, below.indent, true);
            }
            // An empty value.
            return None;
        }
        if at == from {
            // `key:value` is not an entry; `-x` is not an item.
            return None;
        }
        self.inline(at, line.end)?;
        self.next_content();
        match self.line {
            // A plain scalar continuing, or text where none may be: the event path decides.
            Some(next) if next.indent > indent => None,
            _ => Some(()),
        }
    }

    /// True while the innermost open collection is a mapping: an indentless sequence is only
    /// the value of a mapping key, never of a sequence item (`- ` then `- x` below it at the
    /// same column is the next item).
    fn in_mapping_entry(&self) -> bool {
        matches!(
            self.builder.stack.last(),
            Some(super::Frame {
                collection: Collection::Map(_, Some(_)),
                ..
            })
        )
    }

    fn skip_spaces(&self, mut at: usize, end: usize) -> usize {
        while at < end && self.byte(at) == Some(b' ') {
            at += 1;
        }
        at
    }

    /// `-` followed by a space or the end of the line.
    fn is_dash(&self, at: usize) -> bool {
        self.byte(at) == Some(b'-') && matches!(self.byte(at + 1), None | Some(b' ' | b'\n'))
    }

    /// A block sequence whose first dash is at `at`, at column `indent`. An indentless one
    /// starts (for its span) at its first item's text. Leaves the scanner on the first content
    /// line after it.
    fn sequence(&mut self, at: usize, indent: usize, indentless: bool) -> Option<()> {
        let start = if indentless {
            let line = self.line?;
            let first = self.skip_spaces(at + 1, line.end);
            if first == line.end || self.byte(first) == Some(b'#') {
                return None;
            }
            first
        } else {
            at
        };
        self.builder.start(NodeKind::Seq, span(start, start))?;
        let mut dash = at;
        loop {
            let line = self.line?;
            let item = self.skip_spaces(dash + 1, line.end);
            if item == line.end || self.byte(item) == Some(b'#') {
                // The item is the block below the dash.
                self.value_after(dash + 1, indent)?;
            } else if item == dash + 1 || self.is_dash(item) {
                return None;
            } else if self.is_key_at(item) {
                self.mapping(item, item - line.start)?;
            } else {
                self.value_after(dash + 1, indent)?;
            }
            match self.line {
                Some(line) if line.indent == indent && self.is_dash(line.content) => {
                    dash = line.content;
                }
                Some(line) if line.indent > indent => return None,
                _ => break,
            }
        }
        self.builder.end()
    }

    /// A value that starts and ends on this line at `at`: a quoted scalar, a flow collection
    /// or a plain scalar, then at most a comment.
    fn inline(&mut self, at: usize, end: usize) -> Option<()> {
        let after = match self.byte(at)? {
            b'"' | b'\'' => {
                let (text, style, after) = self.quoted(at, end)?;
                self.builder.scalar(text, style, span(at, after))?;
                after
            }
            b'[' | b'{' => self.flow(at, end)?,
            b'-' if !matches!(self.byte(at + 1), None | Some(b' ' | b'\n')) => {
                self.plain(at, end)?
            }
            first if is_indicator(first) => return None,
            _ => self.plain(at, end)?,
        };
        self.rest_is_comment(after, end).then_some(())
    }

    /// Only spaces until the end of the line, or a comment after a space.
    fn rest_is_comment(&self, at: usize, end: usize) -> bool {
        let rest = self.skip_spaces(at, end);
        rest == end || (rest > at && self.byte(rest) == Some(b'#'))
    }

    /// A plain scalar in block context from `at` to the end of the line or a comment: feeds
    /// it and returns the index after its text.
    fn plain(&mut self, at: usize, end: usize) -> Option<usize> {
        let mut stop = end;
        let mut index = at;
        while index < end {
            match self.byte(index)? {
                b'#' if index > at && self.byte(index - 1) == Some(b' ') => {
                    stop = index;
                    break;
                }
                // `a: b: c` is an error; the event path words it.
                b':' if matches!(self.byte(index + 1), None | Some(b' ' | b'\n')) => {
                    return None;
                }
                _ => {}
            }
            index += 1;
        }
        while stop > at && self.byte(stop - 1) == Some(b' ') {
            stop -= 1;
        }
        let text = self.text.get(at..stop)?;
        self.builder
            .scalar(Cow::Borrowed(text), ScalarStyle::Plain, span(at, stop))?;
        Some(stop)
    }

    /// A flow collection opening at `at` and closing on this line: returns the index after
    /// it.
    fn flow(&mut self, at: usize, end: usize) -> Option<usize> {
        let open = self.byte(at)?;
        let (close, collection) = if open == b'[' {
            (b']', NodeKind::Seq)
        } else {
            (b'}', NodeKind::Map)
        };
        self.builder.start(collection, span(at, at + 1))?;
        let mut index = self.skip_spaces(at + 1, end);
        if self.byte(index)? == close {
            self.builder.end()?;
            return Some(index + 1);
        }
        loop {
            if open == b'{' {
                index = self.flow_scalar(index, end)?;
                if self.byte(index)? != b':' {
                    return None;
                }
                index = self.skip_spaces(index + 1, end);
            }
            index = match self.byte(index)? {
                b'[' | b'{' => self.flow(index, end)?,
                _ => self.flow_scalar(index, end)?,
            };
            index = self.skip_spaces(index, end);
            match self.byte(index)? {
                b',' => {
                    index = self.skip_spaces(index + 1, end);
                    // A trailing comma: the event path.
                    if self.byte(index)? == close {
                        return None;
                    }
                }
                byte if byte == close => {
                    self.builder.end()?;
                    return Some(index + 1);
                }
                _ => return None,
            }
        }
    }

    /// A scalar inside a flow collection: quoted, or plain up to `,`, `]`, `}` or (for keys)
    /// `: `. Feeds it and returns the index after it (and after the spaces behind it).
    fn flow_scalar(&mut self, at: usize, end: usize) -> Option<usize> {
        match self.byte(at)? {
            b'"' | b'\'' => {
                let (text, style, after) = self.quoted(at, end)?;
                self.builder.scalar(text, style, span(at, after))?;
                Some(self.skip_spaces(after, end))
            }
            b'-' if !matches!(self.byte(at + 1), Some(b' ' | b',' | b']' | b'}') | None) => {
                self.flow_plain(at, end)
            }
            first if is_indicator(first) => None,
            _ => self.flow_plain(at, end),
        }
    }

    fn flow_plain(&mut self, at: usize, end: usize) -> Option<usize> {
        let mut index = at;
        while index < end {
            match self.byte(index)? {
                b',' | b']' | b'}' => break,
                // `:` (a flow key's end, or text only the event path reads right) and `#`.
                b':' | b'#' | b'[' | b'{' => {
                    if self.byte(index) == Some(b':') && matches!(self.byte(index + 1), Some(b' '))
                    {
                        break;
                    }
                    return None;
                }
                _ => {}
            }
            index += 1;
        }
        let mut stop = index;
        while stop > at && self.byte(stop - 1) == Some(b' ') {
            stop -= 1;
        }
        if stop == at {
            return None;
        }
        let text = self.text.get(at..stop)?;
        self.builder
            .scalar(Cow::Borrowed(text), ScalarStyle::Plain, span(at, stop))?;
        Some(index)
    }
}

fn span(start: usize, end: usize) -> (u32, u32) {
    (start as u32, end as u32)
}

/// The characters that cannot start a plain scalar (YAML 1.2 §7.3.3, `c-indicator`); `-`,
/// `?` and `:` can when a non-space follows, which the callers check for `-` and leave to the
/// event path otherwise.
fn is_indicator(byte: u8) -> bool {
    matches!(
        byte,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}
