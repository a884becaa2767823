//! String and bytes literals: their delimiter shape, the start, the body with its
//! interpolations, and the close (by quote, `'''`/`"""` and `#` count).

use super::{Lexer, Mode, TokenKind};

/// The delimiter shape of a string literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrShape {
    /// `"` or `'`.
    pub quote: u8,
    pub multiline: bool,
    /// The number of `#` around the literal (`#"..."#` has 1).
    pub hashes: u32,
}

impl StrShape {
    /// Reads the shape from the text of a `StrStart` token.
    pub(crate) fn of_start(text: &[u8]) -> StrShape {
        let hashes = text.iter().take_while(|&&byte| byte == b'#').count();
        let quote = text.get(hashes).copied().unwrap_or(b'"');
        let multiline =
            text.get(hashes + 1) == Some(&quote) && text.get(hashes + 2) == Some(&quote);
        StrShape {
            quote,
            multiline,
            hashes: hashes as u32,
        }
    }
}

impl Lexer<'_> {
    pub(super) fn string_start(&mut self, hashes: usize) {
        let start = self.pos;
        let quote = self.peek(hashes);
        let multiline = self.peek(hashes + 1) == quote && self.peek(hashes + 2) == quote;
        if multiline {
            self.pos += hashes + 3;
            // The opening quotes must end their line; that newline is not part of the value.
            while matches!(self.peek(0), b' ' | b'\t' | b'\r') {
                self.pos += 1;
            }
            if self.peek(0) == b'\n' {
                self.pos += 1;
                self.line += 1;
            } else {
                self.error(
                    start as u32,
                    self.pos as u32,
                    "expected newline after multi-line quote",
                );
            }
        } else {
            self.pos += hashes + 1;
        }
        self.push(TokenKind::StrStart, start, self.pos);
        self.modes.push(Mode::Str(StrShape {
            quote,
            multiline,
            hashes: hashes as u32,
        }));
    }

    /// Whether the closing delimiter of `shape` starts at `pos`.
    fn at_closing(&self, shape: StrShape) -> bool {
        let quotes = if shape.multiline { 3 } else { 1 };
        (0..quotes).all(|offset| self.peek(offset) == shape.quote)
            && (0..shape.hashes as usize).all(|offset| self.peek(quotes + offset) == b'#')
    }

    /// Lexes string content up to the closing delimiter or the next interpolation.
    pub(super) fn string_body(&mut self, shape: StrShape) {
        let segment_start = self.pos;
        let hashes = shape.hashes as usize;
        loop {
            let Some(&byte) = self.src.get(self.pos) else {
                self.push_segment(segment_start, self.pos);
                let end = self.src.len() as u32;
                self.error(end, end, "string literal not terminated");
                self.modes.pop();
                self.insert_comma = true;
                return;
            };
            if byte == shape.quote && self.at_closing(shape) {
                self.close_string(shape, segment_start);
                return;
            }
            match byte {
                b'\n' if !shape.multiline => {
                    self.push_segment(segment_start, self.pos);
                    self.error(
                        segment_start as u32,
                        self.pos as u32,
                        "string literal not terminated",
                    );
                    self.push(TokenKind::StrEnd, self.pos, self.pos);
                    self.modes.pop();
                    return;
                }
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                }
                b'\\' if (1..=hashes).all(|offset| self.peek(offset) == b'#') => {
                    if self.peek(hashes + 1) == b'(' {
                        self.push_segment(segment_start, self.pos);
                        let interp_start = self.pos;
                        self.pos += hashes + 2;
                        self.push(TokenKind::InterpStart, interp_start, self.pos);
                        self.modes.push(Mode::Code { parens: 0 });
                        return;
                    }
                    // Skip the escaped character so an escaped quote doesn't close the
                    // literal; a newline is left for the checks above.
                    self.pos += hashes + 1;
                    match self.peek(0) {
                        b'\n' | 0 => {}
                        _ => self.pos += self.char_len_at(self.pos),
                    }
                }
                _ => self.pos += 1,
            }
        }
    }

    fn push_segment(&mut self, start: usize, end: usize) {
        if end > start {
            self.push(TokenKind::StrSegment, start, end);
        }
    }

    fn close_string(&mut self, shape: StrShape, segment_start: usize) {
        let quotes = if shape.multiline { 3 } else { 1 };
        let close_end = self.pos + quotes + shape.hashes as usize;
        let mut end_start = self.pos;
        if shape.multiline {
            // The closing quotes alone on their line give the indentation to strip.
            let line_start = self.src[segment_start..self.pos]
                .iter()
                .rposition(|&byte| byte == b'\n')
                .map(|offset| segment_start + offset);
            let indent_ok = line_start.is_some_and(|newline| {
                self.src[newline + 1..self.pos]
                    .iter()
                    .all(|&byte| byte == b' ' || byte == b'\t')
            });
            match line_start {
                Some(newline) if indent_ok => end_start = newline,
                _ if self.src.get(segment_start.saturating_sub(1)) == Some(&b'\n')
                    && self.src[segment_start..self.pos]
                        .iter()
                        .all(|&byte| byte == b' ' || byte == b'\t')
                    && self.last_kind == TokenKind::StrStart =>
                {
                    // An empty multi-line literal: the newline is in the opening token.
                    end_start = segment_start;
                }
                // Text before the closing quotes on their line: CUE v0.14 accepts it, strips
                // no indentation and keeps that last line (a tab-indented `x"""` line exports
                // as a tab and `x`).
                _ => end_start = self.pos,
            }
        }
        self.push_segment(segment_start, end_start);
        self.modes.pop();
        self.pos = close_end;
        self.push(TokenKind::StrEnd, end_start, close_end);
    }
}
