//! String and bytes literals: assembling the lexer's pieces into [`ast::StringPart`]s, stripping
//! multi-line indentation and decoding escapes.
//!
//! Indentation is stripped from the raw text before escapes are decoded, so an escaped `\n` never
//! starts a line. The rule (spec "String and byte sequence literals"): the whitespace before the
//! closing `"""` is removed from the start of every line; a non-empty line that does not start
//! with it is an error. Lines holding only whitespace become empty.

use super::Parser;
use super::expr::starts_expr;
use super::lexer::{StrShape, TokenKind};
use crate::ErrorKind;
use crate::ast;

/// A piece of a literal before decoding.
enum RawPart {
    /// A byte range of literal text in the source.
    Lit(u32, u32),
    Interp(ast::Expr),
}

impl Parser<'_> {
    /// Parses a string or bytes literal starting at a `StrStart` token.
    pub(super) fn string_expr(&mut self) -> ast::Expr {
        let open = self.bump();
        let shape = StrShape::of_start(self.text(open).as_bytes());
        let mut raw_parts = Vec::new();
        let mut close = None;
        loop {
            match self.kind() {
                TokenKind::StrSegment => {
                    let token = self.bump();
                    raw_parts.push(RawPart::Lit(token.start, token.end));
                }
                TokenKind::InterpStart => {
                    let token = self.bump();
                    let expr = if starts_expr(self.kind()) {
                        self.expr()
                    } else {
                        self.error_expected("expression in interpolation");
                        self.placeholder(token.end)
                    };
                    if self.eat(TokenKind::InterpEnd).is_none() {
                        self.error_expected("')' to close the interpolation");
                        self.skip_interpolation();
                    }
                    raw_parts.push(RawPart::Interp(expr));
                }
                TokenKind::StrEnd => {
                    close = Some(self.bump());
                    break;
                }
                // The lexer reported the unterminated literal.
                _ => break,
            }
        }
        let indent = match close {
            Some(token) if shape.multiline => {
                let text = self.text(token);
                let text = text.strip_prefix('\n').unwrap_or(text);
                let quote = char::from(shape.quote);
                text.split(quote).next().unwrap_or("")
            }
            _ => "",
        };
        let is_bytes = shape.quote == b'\'';
        let mut parts = Vec::with_capacity(raw_parts.len());
        let mut decoded = Vec::new();
        for (index, raw) in raw_parts.into_iter().enumerate() {
            match raw {
                RawPart::Lit(start, end) => {
                    decoded.clear();
                    let line_start = shape.multiline && index == 0;
                    self.decode(start, end, shape, line_start, indent, &mut decoded);
                    if decoded.is_empty() {
                        continue;
                    }
                    let text = match String::from_utf8(std::mem::take(&mut decoded)) {
                        Ok(text) => text,
                        Err(error) => {
                            // Only bytes literals can get here (`\xFF`); `StringPart` holds
                            // text, so non-UTF-8 bytes cannot be represented.
                            self.report(
                                ErrorKind::Unsupported,
                                self.span(start, end),
                                "unsupported: bytes literal that is not valid UTF-8".to_owned(),
                            );
                            String::from_utf8_lossy(error.as_bytes()).into_owned()
                        }
                    };
                    parts.push(ast::StringPart::Lit(text));
                }
                RawPart::Interp(expr) => parts.push(ast::StringPart::Interp(expr)),
            }
        }
        let span = self.span_from(open.start);
        if is_bytes {
            ast::Expr::Bytes { parts, span }
        } else {
            ast::Expr::String { parts, span }
        }
    }

    /// Recovery inside a broken interpolation: skips to its `)` or the end of the literal.
    fn skip_interpolation(&mut self) {
        let mut strings = 0u32;
        loop {
            match self.kind() {
                TokenKind::Eof => return,
                TokenKind::StrStart => strings += 1,
                TokenKind::StrEnd if strings == 0 => return,
                TokenKind::StrEnd => strings -= 1,
                TokenKind::InterpEnd if strings == 0 => {
                    self.bump();
                    return;
                }
                _ => {}
            }
            self.bump();
        }
    }

    /// Decodes the raw literal text `start..end` into `out`: strips `indent` at line starts
    /// (multi-line literals), drops carriage returns and decodes escapes.
    fn decode(
        &mut self,
        start: u32,
        end: u32,
        shape: StrShape,
        mut line_start: bool,
        indent: &str,
        out: &mut Vec<u8>,
    ) {
        let raw = self
            .src
            .as_bytes()
            .get(start as usize..end as usize)
            .unwrap_or(&[]);
        let hashes = shape.hashes as usize;
        let mut i = 0;
        while i < raw.len() {
            if line_start {
                line_start = false;
                let rest = &raw[i..];
                if rest.starts_with(indent.as_bytes()) {
                    i += indent.len();
                    continue;
                }
                let line_len = rest
                    .iter()
                    .position(|&byte| byte == b'\n')
                    .unwrap_or(rest.len());
                if rest[..line_len]
                    .iter()
                    .all(|&byte| matches!(byte, b' ' | b'\t' | b'\r'))
                {
                    i += line_len;
                    continue;
                }
                let at = start + i as u32;
                self.error(
                    self.span(at, at + line_len as u32),
                    "invalid indentation in multi-line string: lines must start with the \
                     indentation of the closing quotes",
                );
            }
            let byte = raw[i];
            match byte {
                b'\n' => {
                    out.push(b'\n');
                    i += 1;
                    line_start = shape.multiline;
                }
                // Carriage returns are dropped from literal values (spec).
                b'\r' => i += 1,
                b'\\'
                    if raw
                        .get(i + 1..i + 1 + hashes)
                        .is_some_and(|marks| marks.iter().all(|&mark| mark == b'#')) =>
                {
                    let escape_start = i;
                    i += 1 + hashes;
                    let (next, continued) = self.escape(raw, i, start, escape_start, shape, out);
                    i = next;
                    if continued {
                        line_start = shape.multiline;
                    }
                }
                _ => {
                    out.push(byte);
                    i += 1;
                }
            }
        }
    }

    /// Decodes one escape whose letter is at `raw[at]`. Returns the index after it, and whether
    /// it was a line continuation (a backslash ending the line).
    fn escape(
        &mut self,
        raw: &[u8],
        at: usize,
        base: u32,
        escape_start: usize,
        shape: StrShape,
        out: &mut Vec<u8>,
    ) -> (usize, bool) {
        let is_bytes = shape.quote == b'\'';
        let Some(&letter) = raw.get(at) else {
            return (at, false);
        };
        let span_to = |end: usize| (base + escape_start as u32, base + end as u32);
        let simple = match letter {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0C),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0B),
            b'/' => Some(b'/'),
            b'\\' => Some(b'\\'),
            b'\'' if is_bytes => Some(b'\''),
            b'"' if !is_bytes => Some(b'"'),
            _ => None,
        };
        if let Some(value) = simple {
            out.push(value);
            return (at + 1, false);
        }
        match letter {
            b'\n' => (at + 1, true),
            b'\r' if raw.get(at + 1) == Some(&b'\n') => (at + 2, true),
            b'u' | b'U' => {
                let digits = if letter == b'u' { 4 } else { 8 };
                let Some(mut value) = hex_value(raw, at + 1, digits) else {
                    let (start, end) = span_to((at + 1 + digits).min(raw.len()));
                    self.error(
                        self.span(start, end),
                        format!(
                            "invalid escape: '\\{}' needs {digits} hex digits",
                            char::from(letter)
                        ),
                    );
                    return (at + 1, false);
                };
                let mut next = at + 1 + digits;
                // A surrogate pair written as two `\u` escapes stands for one character.
                if (0xD800..0xDC00).contains(&value)
                    && raw.get(next) == Some(&b'\\')
                    && raw.get(next + 1) == Some(&b'u')
                    && let Some(low) = hex_value(raw, next + 2, 4)
                    && (0xDC00..0xE000).contains(&low)
                {
                    value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00);
                    next += 6;
                }
                // A lone surrogate half: CUE reports "unmatched surrogate pair".
                if (0xD800..0xE000).contains(&value) {
                    let (start, end) = span_to(next);
                    self.error(self.span(start, end), "unmatched surrogate pair in escape");
                    return (next, false);
                }
                match char::from_u32(value) {
                    Some(character) => {
                        let mut buffer = [0; 4];
                        out.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes());
                    }
                    None => {
                        let (start, end) = span_to(next);
                        self.error(
                            self.span(start, end),
                            format!("invalid Unicode code point U+{value:X} in escape"),
                        );
                    }
                }
                (next, false)
            }
            b'x' | b'0'..=b'7' => {
                let (value, next) = if letter == b'x' {
                    (hex_value(raw, at + 1, 2), at + 3)
                } else {
                    (octal_value(raw, at), at + 3)
                };
                let (start, end) = span_to(next.min(raw.len()));
                match value {
                    Some(value) if is_bytes => out.push(value as u8),
                    Some(_) => self.error(
                        self.span(start, end),
                        "hexadecimal and octal escapes are only allowed in bytes literals ('...')",
                    ),
                    None => {
                        self.error(self.span(start, end), "invalid hexadecimal or octal escape")
                    }
                }
                (next.min(raw.len()), false)
            }
            _ => {
                // Look at no more than one character: the rest may be long.
                let slice = raw.get(at..(at + 4).min(raw.len())).unwrap_or(&[]);
                let valid = match std::str::from_utf8(slice) {
                    Ok(text) => text,
                    Err(error) => std::str::from_utf8(&slice[..error.valid_up_to()]).unwrap_or(""),
                };
                let character = valid.chars().next().unwrap_or(char::from(letter));
                let (start, end) = span_to(at + character.len_utf8());
                self.error(
                    self.span(start, end),
                    format!("unknown escape sequence '\\{character}'"),
                );
                (at + character.len_utf8(), false)
            }
        }
    }
}

fn hex_value(raw: &[u8], at: usize, digits: usize) -> Option<u32> {
    let text = raw.get(at..at + digits)?;
    if !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(text).ok()?, 16).ok()
}

/// Three octal digits with a value of at most 255.
fn octal_value(raw: &[u8], at: usize) -> Option<u32> {
    let text = raw.get(at..at + 3)?;
    if !text.iter().all(|byte| (b'0'..=b'7').contains(byte)) {
        return None;
    }
    let value = u32::from_str_radix(std::str::from_utf8(text).ok()?, 8).ok()?;
    (value <= 255).then_some(value)
}
