//! The CUE lexer: source text to a flat token vector, plus comment groups and lexical errors.
//!
//! It is modal (like Nickel's lexer): a stack of modes tracks whether we are in ordinary code or
//! inside a string literal, and each `\(` in a string pushes a code mode that ends at its
//! matching `)`. A string therefore comes out as `StrStart`, then `StrSegment` / `InterpStart`
//! .. `InterpEnd` pieces, then `StrEnd`; segments are raw source ranges, and the parser decodes
//! escapes and strips multi-line indentation once it has seen the whole literal.
//!
//! It also inserts commas after a line's last token as the CUE spec ("Commas") prescribes, and
//! groups `//` comment lines so the parser can attach doc comments to fields. It works on bytes
//! and only allocates for the output vectors. String literals are lexed in `lexer/strings.rs`.

use crate::span::FileId;
use crate::{Error, ErrorKind};

mod strings;

pub(crate) use strings::StrShape;

/// What a token is. Keywords are `Ident` tokens: CUE allows every keyword as a label, so the
/// parser decides from context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Ident,
    Int,
    Float,
    /// `_|_`
    Bottom,
    /// `@name(...)`, kept whole.
    Attribute,
    /// The opening delimiter of a string or bytes literal: `#*` then `"`, `"""`, `'` or `'''`
    /// (for multi-line literals the span also covers the newline after the quotes).
    StrStart,
    /// Raw literal text inside a string, escapes not yet decoded.
    StrSegment,
    /// `\(` (or `\#(` in a `#"..."#` literal).
    InterpStart,
    /// The `)` that closes an interpolation.
    InterpEnd,
    /// The closing delimiter. For multi-line literals the span starts at the newline before the
    /// closing quotes, so the indentation to strip is the text between that newline and them.
    StrEnd,
    /// `,`, written (`implicit == false`) or inserted at a newline or end of file.
    Comma,
    LParen,
    RParen,
    LBrack,
    RBrack,
    LBrace,
    RBrace,
    Colon,
    Question,
    Not,
    Assign,
    Dot,
    Ellipsis,
    Add,
    Sub,
    Mul,
    Quo,
    And,
    Or,
    LAnd,
    LOr,
    Eql,
    Neq,
    Lss,
    Leq,
    Gtr,
    Geq,
    Mat,
    Nmat,
    /// A character that starts no token; the lexer has reported it.
    Illegal,
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    pub start: u32,
    pub end: u32,
    /// For `Comma`: whether it was inserted at a newline or end of file.
    pub implicit: bool,
    /// Index + 1 into [`Lexed::doc_groups`] of the comment block directly above this token (no
    /// blank line between, each comment on its own line); 0 when there is none.
    pub doc: u32,
}

/// The lexer's output.
#[derive(Debug, Default)]
pub(crate) struct Lexed {
    pub tokens: Vec<Token>,
    /// Every `//` comment, as the byte range of the whole comment including `//`.
    pub comments: Vec<(u32, u32)>,
    /// Doc comment blocks: ranges into `comments`.
    pub doc_groups: Vec<(u32, u32)>,
    pub errors: Vec<Error>,
}

/// Tokenizes `source`. Never fails: problems are reported in [`Lexed::errors`] and the token
/// stream always ends with `Eof`.
pub(crate) fn lex(file: FileId, source: &str) -> Lexed {
    let mut lexer = Lexer {
        file,
        source,
        src: source.as_bytes(),
        pos: 0,
        line: 0,
        modes: vec![Mode::Code { parens: 0 }],
        insert_comma: false,
        last_kind: TokenKind::Comma,
        last_token_line: u32::MAX,
        pending_group: None,
        out: Lexed::default(),
    };
    lexer.out.tokens.reserve(source.len() / 3);
    // A byte order mark at the start is not part of the program.
    if source.starts_with('\u{feff}') {
        lexer.pos = 3;
    }
    lexer.run();
    lexer.out
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Ordinary code. `parens` counts open `(` so an interpolation ends at its own `)`.
    Code { parens: u32 },
    /// Inside a string or bytes literal.
    Str(StrShape),
}

/// A doc comment block being collected: its first comment index and the line of its last one.
#[derive(Debug, Clone, Copy)]
struct PendingGroup {
    first: u32,
    last_line: u32,
}

struct Lexer<'a> {
    file: FileId,
    source: &'a str,
    src: &'a [u8],
    pos: usize,
    /// 0-based line of `pos`.
    line: u32,
    modes: Vec<Mode>,
    /// Whether a newline here becomes a comma (the last token ends an operand).
    insert_comma: bool,
    last_kind: TokenKind,
    last_token_line: u32,
    pending_group: Option<PendingGroup>,
    out: Lexed,
}

impl Lexer<'_> {
    fn run(&mut self) {
        loop {
            match self.modes.last().copied() {
                Some(Mode::Str(shape)) => self.string_body(shape),
                Some(Mode::Code { .. }) => {
                    if !self.code_token() {
                        break;
                    }
                }
                None => break,
            }
        }
        let end = self.src.len() as u32;
        if self.modes.len() > 1 {
            // Unterminated interpolation or string: the error was or is reported here.
            self.error(end, end, "unexpected end of file in string literal");
        }
        if self.insert_comma {
            self.push_raw(TokenKind::Comma, end, end, true);
        }
        self.push_raw(TokenKind::Eof, end, end, false);
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.src.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn error(&mut self, start: u32, end: u32, message: impl Into<String>) {
        let span = super::char_span(self.file, self.source, start, end);
        self.out
            .errors
            .push(Error::new(ErrorKind::Syntax, message, span));
    }

    /// Pushes a token and updates the comma-insertion and doc-comment state.
    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        let doc = match self.pending_group.take() {
            Some(group) if group.last_line + 1 == self.line => {
                let last = self.out.comments.len() as u32;
                self.out.doc_groups.push((group.first, last));
                self.out.doc_groups.len() as u32
            }
            _ => 0,
        };
        self.out.tokens.push(Token {
            kind,
            start: start as u32,
            end: end as u32,
            implicit: false,
            doc,
        });
        self.last_kind = kind;
        self.last_token_line = self.line;
        self.insert_comma = matches!(
            kind,
            TokenKind::Ident
                | TokenKind::Int
                | TokenKind::Float
                | TokenKind::Bottom
                | TokenKind::Attribute
                | TokenKind::StrEnd
                | TokenKind::RParen
                | TokenKind::RBrack
                | TokenKind::RBrace
                | TokenKind::Question
                | TokenKind::Ellipsis
        );
    }

    fn push_raw(&mut self, kind: TokenKind, start: u32, end: u32, implicit: bool) {
        self.out.tokens.push(Token {
            kind,
            start,
            end,
            implicit,
            doc: 0,
        });
        self.last_kind = kind;
        self.insert_comma = false;
    }

    /// Inside an interpolation commas are never inserted: the `)` closing it must follow.
    fn in_interpolation(&self) -> bool {
        self.modes.len() > 1
    }

    /// Lexes one token (or skips whitespace/comments) in code mode. Returns false at the end.
    fn code_token(&mut self) -> bool {
        let start = self.pos;
        let Some(&byte) = self.src.get(start) else {
            return false;
        };
        match byte {
            b'\n' => {
                if self.insert_comma && !self.in_interpolation() && !self.next_line_continues() {
                    self.push_raw(TokenKind::Comma, start as u32, start as u32 + 1, true);
                }
                self.pos += 1;
                self.line += 1;
            }
            b' ' | b'\t' | b'\r' => self.pos += 1,
            b'/' if self.peek(1) == b'/' => self.comment(),
            b'"' | b'\'' => self.string_start(0),
            b'#' => {
                let hashes = self.src[start..]
                    .iter()
                    .take_while(|&&byte| byte == b'#')
                    .count();
                let next = self.peek(hashes);
                if next == b'"' || next == b'\'' {
                    self.string_start(hashes);
                } else if hashes == 1 && self.starts_letter(1) {
                    self.identifier();
                } else if hashes == 1 && !self.peek(1).is_ascii_digit() {
                    // A lone `#` is an identifier (the Go scanner accepts `#: 1`, `x: #`).
                    self.pos += 1;
                    self.push(TokenKind::Ident, start, self.pos);
                } else {
                    self.pos += hashes;
                    self.error(start as u32, self.pos as u32, "illegal character '#'");
                    self.push(TokenKind::Illegal, start, self.pos);
                }
            }
            b'_' if self.peek(1) == b'|' && self.peek(2) == b'_' => {
                self.pos += 3;
                self.push(TokenKind::Bottom, start, self.pos);
            }
            b'_' if self.peek(1) == b'#' && self.starts_letter(2) => self.identifier(),
            b'0'..=b'9' => self.number(),
            b'.' if self.peek(1).is_ascii_digit() && !self.ends_operand() => self.number(),
            b'@' => self.attribute(),
            _ if byte.is_ascii_alphabetic() || byte == b'_' || byte == b'$' || byte >= 0x80 => {
                if self.starts_letter(0) {
                    self.identifier();
                } else {
                    let len = self.char_len_at(start);
                    self.pos += len;
                    let text = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
                    self.error(
                        start as u32,
                        self.pos as u32,
                        format!("illegal character '{text}'"),
                    );
                    self.push(TokenKind::Illegal, start, self.pos);
                }
            }
            _ => self.operator(byte),
        }
        true
    }

    /// Whether the next token after this newline is `,` or `:`, so the line continues: the Go
    /// implementation accepts "front-style" commas and colons (`a\n: 1`, `x\n, y`), as in
    /// CUE's `compile/json.txtar`.
    fn next_line_continues(&self) -> bool {
        let mut at = self.pos;
        while let Some(&byte) = self.src.get(at) {
            match byte {
                b' ' | b'\t' | b'\r' | b'\n' => at += 1,
                b'/' if self.src.get(at + 1) == Some(&b'/') => {
                    while self.src.get(at).is_some_and(|&byte| byte != b'\n') {
                        at += 1;
                    }
                }
                b',' | b':' => return true,
                _ => return false,
            }
        }
        false
    }

    /// Whether the last token ends an operand, so `.5` after it is a selector, not a number
    /// (spec: "Neither a float_lit nor an si_lit may appear after a token that is ...").
    fn ends_operand(&self) -> bool {
        self.insert_comma || self.last_kind == TokenKind::Dot
    }

    fn comment(&mut self) {
        let start = self.pos;
        let end = self.src[start..]
            .iter()
            .position(|&byte| byte == b'\n')
            .map_or(self.src.len(), |offset| start + offset);
        self.pos = end;
        let index = self.out.comments.len() as u32;
        self.out.comments.push((start as u32, end as u32));
        let own_line = self.last_token_line != self.line;
        if !own_line {
            // A trailing comment documents nothing, and ends any block above.
            self.pending_group = None;
            return;
        }
        self.pending_group = match self.pending_group {
            Some(group) if group.last_line + 1 == self.line => Some(PendingGroup {
                first: group.first,
                last_line: self.line,
            }),
            _ => Some(PendingGroup {
                first: index,
                last_line: self.line,
            }),
        };
    }

    /// The UTF-8 length of the character at `at` (1 for a stray byte).
    fn char_len_at(&self, at: usize) -> usize {
        let first = self.src.get(at).copied().unwrap_or(0);
        let len = match first {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        len.min(self.src.len().saturating_sub(at)).max(1)
    }

    /// The character at `pos + ahead`, if it is valid UTF-8.
    fn char_at(&self, ahead: usize) -> Option<char> {
        let at = self.pos + ahead;
        let len = self.char_len_at(at);
        let bytes = self.src.get(at..at + len)?;
        std::str::from_utf8(bytes).ok()?.chars().next()
    }

    fn starts_letter(&self, ahead: usize) -> bool {
        match self.src.get(self.pos + ahead) {
            Some(&byte) if byte < 0x80 => {
                byte.is_ascii_alphabetic() || byte == b'_' || byte == b'$'
            }
            Some(_) => self.char_at(ahead).is_some_and(char::is_alphabetic),
            None => false,
        }
    }

    fn continues_identifier(&self, ahead: usize) -> bool {
        match self.src.get(self.pos + ahead) {
            Some(&byte) if byte < 0x80 => {
                byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$'
            }
            Some(_) => self.char_at(ahead).is_some_and(char::is_alphanumeric),
            None => false,
        }
    }

    /// Lexes an identifier, including a `#` or `_#` prefix.
    fn identifier(&mut self) {
        let start = self.pos;
        if self.peek(0) == b'_' && self.peek(1) == b'#' {
            self.pos += 2;
        } else if self.peek(0) == b'#' {
            self.pos += 1;
        }
        while self.continues_identifier(0) {
            let len = self.char_len_at(self.pos);
            self.pos += len;
        }
        self.push(TokenKind::Ident, start, self.pos);
    }

    /// Lexes a number literal. The text is kept; the parser only needs int vs float, and the
    /// evaluator parses the value.
    fn number(&mut self) {
        let start = self.pos;
        let mut kind = TokenKind::Int;
        let mut valid = true;
        let radix_digits: Option<fn(u8) -> bool> = if self.peek(0) == b'0' {
            match self.peek(1) {
                b'x' | b'X' => Some(|byte: u8| byte.is_ascii_hexdigit()),
                b'o' => Some(|byte: u8| (b'0'..=b'7').contains(&byte)),
                b'b' => Some(|byte: u8| byte == b'0' || byte == b'1'),
                _ => None,
            }
        } else {
            None
        };
        if let Some(is_digit) = radix_digits {
            self.pos += 2;
            let digits_start = self.pos;
            while is_digit(self.peek(0)) || self.peek(0) == b'_' {
                self.pos += 1;
            }
            valid = self.pos > digits_start;
        } else {
            self.decimals();
            // `1.` is a float, but `1..` is not (there is no `..` operator; keep `...` whole).
            if self.peek(0) == b'.' && self.peek(1) != b'.' {
                self.pos += 1;
                self.decimals();
                kind = TokenKind::Float;
            }
            let exponent = matches!(self.peek(0), b'e' | b'E')
                && (self.peek(1).is_ascii_digit()
                    || (matches!(self.peek(1), b'+' | b'-') && self.peek(2).is_ascii_digit()));
            if exponent {
                self.pos += 2;
                self.decimals();
                kind = TokenKind::Float;
            } else if matches!(self.peek(0), b'K' | b'M' | b'G' | b'T' | b'P') {
                // An SI or IEC multiplier makes an integer literal (spec: si_lit).
                self.pos += 1;
                if self.peek(0) == b'i' {
                    self.pos += 1;
                }
                kind = TokenKind::Int;
            }
        }
        // Letters glued to a number (`1abc`, `0x`) make one invalid literal, not two tokens.
        while self.continues_identifier(0) {
            valid = false;
            let len = self.char_len_at(self.pos);
            self.pos += len;
        }
        // `0755`: CUE has no C-style octal; a leading zero is only allowed before a fraction
        // or exponent (`072.40`).
        let text = &self.src[start..self.pos];
        if valid
            && kind == TokenKind::Int
            && text.first() == Some(&b'0')
            && text
                .get(1)
                .is_some_and(|byte| byte.is_ascii_digit() || *byte == b'_')
        {
            let text = String::from_utf8_lossy(text).into_owned();
            self.error(
                start as u32,
                self.pos as u32,
                format!("illegal integer literal '{text}': use '0o' for octal"),
            );
        } else if !valid {
            let text = String::from_utf8_lossy(&self.src[start..self.pos]).into_owned();
            self.error(
                start as u32,
                self.pos as u32,
                format!("invalid number literal '{text}'"),
            );
        }
        self.push(kind, start, self.pos);
    }

    fn decimals(&mut self) {
        while self.peek(0).is_ascii_digit()
            || (self.peek(0) == b'_' && self.peek(1).is_ascii_digit())
        {
            self.pos += 1;
        }
    }

    /// Lexes `@name(...)` whole. The body may nest `()`, `[]`, `{}` and contain strings.
    fn attribute(&mut self) {
        let start = self.pos;
        self.pos += 1;
        while self.continues_identifier(0) || self.peek(0) == b'#' {
            let len = self.char_len_at(self.pos);
            self.pos += len;
        }
        if self.pos == start + 1 {
            self.error(
                start as u32,
                self.pos as u32,
                "expected attribute name after '@'",
            );
            self.push(TokenKind::Illegal, start, self.pos);
            return;
        }
        if self.peek(0) != b'(' {
            self.error(
                start as u32,
                self.pos as u32,
                "expected '(' after attribute name",
            );
            self.push(TokenKind::Illegal, start, self.pos);
            return;
        }
        let mut closers: Vec<u8> = Vec::new();
        loop {
            let Some(&byte) = self.src.get(self.pos) else {
                self.error(start as u32, self.pos as u32, "attribute not terminated");
                break;
            };
            self.pos += 1;
            match byte {
                b'(' => closers.push(b')'),
                b'[' => closers.push(b']'),
                b'{' => closers.push(b'}'),
                b')' | b']' | b'}' => {
                    if closers.last() == Some(&byte) {
                        closers.pop();
                        if closers.is_empty() {
                            break;
                        }
                    } else {
                        let at = self.pos as u32 - 1;
                        self.error(at, at + 1, "unbalanced bracket in attribute");
                        break;
                    }
                }
                b'"' | b'\'' => {
                    // Skip a quoted string so brackets inside it don't count.
                    while let Some(&inner) = self.src.get(self.pos) {
                        if inner == b'\n' {
                            break;
                        }
                        self.pos += 1;
                        if inner == b'\\' {
                            self.pos = (self.pos + 1).min(self.src.len());
                        } else if inner == byte {
                            break;
                        }
                    }
                }
                b'\n' => self.line += 1,
                _ => {}
            }
        }
        self.push(TokenKind::Attribute, start, self.pos);
    }

    fn operator(&mut self, byte: u8) {
        let start = self.pos;
        let next = self.peek(1);
        let (kind, len) = match byte {
            b'(' => {
                if let Some(Mode::Code { parens }) = self.modes.last_mut() {
                    *parens += 1;
                }
                (TokenKind::LParen, 1)
            }
            b')' => {
                let nested = self.modes.len() > 1;
                if let Some(Mode::Code { parens }) = self.modes.last_mut() {
                    if *parens == 0 && nested {
                        self.modes.pop();
                        self.pos += 1;
                        self.push(TokenKind::InterpEnd, start, self.pos);
                        return;
                    }
                    *parens = parens.saturating_sub(1);
                }
                (TokenKind::RParen, 1)
            }
            b'[' => (TokenKind::LBrack, 1),
            b']' => (TokenKind::RBrack, 1),
            b'{' => (TokenKind::LBrace, 1),
            b'}' => (TokenKind::RBrace, 1),
            b',' => (TokenKind::Comma, 1),
            b':' => (TokenKind::Colon, 1),
            b'?' => (TokenKind::Question, 1),
            b'.' if next == b'.' && self.peek(2) == b'.' => (TokenKind::Ellipsis, 3),
            b'.' => (TokenKind::Dot, 1),
            b'+' => (TokenKind::Add, 1),
            b'-' => (TokenKind::Sub, 1),
            b'*' => (TokenKind::Mul, 1),
            b'/' => (TokenKind::Quo, 1),
            b'&' if next == b'&' => (TokenKind::LAnd, 2),
            b'&' => (TokenKind::And, 1),
            b'|' if next == b'|' => (TokenKind::LOr, 2),
            b'|' => (TokenKind::Or, 1),
            b'=' if next == b'=' => (TokenKind::Eql, 2),
            b'=' if next == b'~' => (TokenKind::Mat, 2),
            b'=' => (TokenKind::Assign, 1),
            b'!' if next == b'=' => (TokenKind::Neq, 2),
            b'!' if next == b'~' => (TokenKind::Nmat, 2),
            b'!' => (TokenKind::Not, 1),
            b'<' if next == b'=' => (TokenKind::Leq, 2),
            b'<' => (TokenKind::Lss, 1),
            b'>' if next == b'=' => (TokenKind::Geq, 2),
            b'>' => (TokenKind::Gtr, 1),
            _ => {
                let len = self.char_len_at(start);
                let text = String::from_utf8_lossy(&self.src[start..start + len]).into_owned();
                let message = if byte < 0x20 || byte == 0x7f {
                    format!("illegal character {:?}", char::from(byte))
                } else {
                    format!("illegal character '{text}'")
                };
                self.error(start as u32, (start + len) as u32, message);
                (TokenKind::Illegal, len)
            }
        };
        self.pos += len;
        if kind == TokenKind::Comma {
            self.push_raw(TokenKind::Comma, start as u32, self.pos as u32, false);
            // A written comma still consumes the doc state like any token.
            self.pending_group = None;
            self.last_token_line = self.line;
        } else {
            self.push(kind, start, self.pos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Vec<TokenKind> {
        lex(FileId(0), source)
            .tokens
            .iter()
            .map(|token| token.kind)
            .collect()
    }

    #[test]
    fn inserts_commas_after_operands_at_newlines() {
        use TokenKind::*;
        assert_eq!(
            kinds("a: 1\nb: c &\n d\n"),
            vec![
                Ident, Colon, Int, Comma, Ident, Colon, Ident, And, Ident, Comma, Eof
            ]
        );
        let lexed = lex(FileId(0), "a: 1\n");
        assert!(lexed.tokens[3].implicit);
    }

    #[test]
    fn dot_number_is_a_selector_after_an_operand() {
        use TokenKind::*;
        assert_eq!(kinds("a .5"), vec![Ident, Dot, Int, Comma, Eof]);
        assert_eq!(kinds("a + .5"), vec![Ident, Add, Float, Comma, Eof]);
    }

    #[test]
    fn interpolation_tokens_nest() {
        use TokenKind::*;
        assert_eq!(
            kinds(r#""a\(f("b\(c)"))d""#),
            vec![
                StrStart,
                StrSegment,
                InterpStart,
                Ident,
                LParen,
                StrStart,
                StrSegment,
                InterpStart,
                Ident,
                InterpEnd,
                StrEnd,
                RParen,
                InterpEnd,
                StrSegment,
                StrEnd,
                Comma,
                Eof
            ]
        );
    }

    #[test]
    fn doc_groups_skip_trailing_and_separated_comments() {
        let source = "// one\n// two\na: 1 // trailing\n\n// lost\n\nb: 2\n// three\nc: 3\n";
        let lexed = lex(FileId(0), source);
        let docs: Vec<(u32, u32)> = lexed
            .tokens
            .iter()
            .filter(|token| token.doc != 0)
            .map(|token| lexed.doc_groups[token.doc as usize - 1])
            .collect();
        assert_eq!(docs, vec![(0, 2), (4, 5)]);
        assert_eq!(lexed.comments.len(), 5);
    }
}
