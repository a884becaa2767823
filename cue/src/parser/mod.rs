//! The CUE parser: source text to [`ast::File`] plus syntax errors.
//!
//! It is a hand-written recursive-descent parser over the token vector from [`lexer`]: the
//! declaration level (package clause, imports, fields, let clauses, comprehensions) is in
//! `decl.rs`, precedence climbing for binary operators in `expr.rs` and literal decoding in
//! `literal.rs`. This file holds the entry point, the shared token cursor, error reporting and
//! the nesting cap.
//!
//! It recovers from errors: a bad declaration is reported with its span and skipped up to the
//! next comma, newline or closing brace, so one typo yields one error and the rest of the file is
//! still parsed. Nesting is capped at [`MAX_DEPTH`] so no input can overflow the stack.

mod decl;
mod expr;
mod lexer;
mod literal;
#[cfg(test)]
mod tests;

use crate::ast;
use crate::span::{FileId, Span};
use crate::{Error, ErrorKind};
use lexer::{Token, TokenKind};

/// A parsed file and the syntax errors found while parsing it. The parser recovers, so `file`
/// holds every declaration it could read even when `errors` is not empty.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub file: ast::File,
    pub errors: Vec<Error>,
}

/// Parses one CUE source text. Spans are byte offsets into `source`, tagged with `file`.
///
/// Errors are sorted by position. Constructs of the CUE syntax that [`ast`] cannot represent
/// (aliases on values and inside pattern labels) are reported as [`ErrorKind::Unsupported`].
pub fn parse_file(file: FileId, source: &str) -> Parsed {
    let lexed = lexer::lex(file, source);
    let mut parser = Parser {
        file,
        src: source,
        tokens: lexed.tokens,
        comments: lexed.comments,
        doc_groups: lexed.doc_groups,
        pos: 0,
        last_end: 0,
        depth: 0,
        chain: 0,
        too_deep: false,
        errors: Vec::new(),
    };
    let ast = parser.file(source);
    let mut errors = lexed.errors;
    errors.extend(parser.errors);
    // Lexer and parser errors interleave; report them in source order, one per position.
    errors.sort_by_key(|error| error.span().map_or(0, |span| span.start));
    errors.dedup_by(|later, earlier| {
        later.span().map(|span| span.start) == earlier.span().map(|span| span.start)
            && later.kind == earlier.kind
    });
    errors.truncate(MAX_ERRORS);
    Parsed { file: ast, errors }
}

/// The deepest nesting of expressions, structs and label chains the parser follows. Real
/// templates nest about 15 levels; the cap keeps recursion bounded on hostile input.
pub(crate) const MAX_DEPTH: u32 = 200;

/// At most this many errors are reported for one file; after that they are mostly cascades.
const MAX_ERRORS: usize = 100;

struct Parser<'a> {
    file: FileId,
    src: &'a str,
    tokens: Vec<Token>,
    comments: Vec<(u32, u32)>,
    doc_groups: Vec<(u32, u32)>,
    pos: usize,
    /// End offset of the last consumed token (commas excluded), for node spans.
    last_end: u32,
    depth: u32,
    /// Extra tree depth from operator and selector chains in progress (see `expr.rs`).
    chain: u32,
    /// Set once [`MAX_DEPTH`] is exceeded: the rest of the input is skipped.
    too_deep: bool,
    errors: Vec<Error>,
}

impl<'a> Parser<'a> {
    // ----- token cursor -----

    fn peek(&self) -> Token {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Token {
        match self.tokens.get(self.pos + ahead) {
            Some(token) => *token,
            None => self.eof_token(),
        }
    }

    fn eof_token(&self) -> Token {
        self.tokens.last().copied().unwrap_or(Token {
            kind: TokenKind::Eof,
            start: self.src.len() as u32,
            end: self.src.len() as u32,
            implicit: false,
            doc: 0,
        })
    }

    fn kind(&self) -> TokenKind {
        self.peek().kind
    }

    fn at(&self, kind: TokenKind) -> bool {
        self.kind() == kind
    }

    fn bump(&mut self) -> Token {
        let token = self.peek();
        if token.kind != TokenKind::Eof {
            self.pos += 1;
            if token.kind != TokenKind::Comma {
                self.last_end = token.end;
            }
        }
        token
    }

    fn eat(&mut self, kind: TokenKind) -> Option<Token> {
        if self.at(kind) {
            Some(self.bump())
        } else {
            None
        }
    }

    fn text(&self, token: Token) -> &'a str {
        self.src
            .get(token.start as usize..token.end as usize)
            .unwrap_or("")
    }

    fn is_keyword(&self, token: Token, keyword: &str) -> bool {
        token.kind == TokenKind::Ident && self.text(token) == keyword
    }

    fn span(&self, start: u32, end: u32) -> Span {
        char_span(self.file, self.src, start, end)
    }

    fn token_span(&self, token: Token) -> Span {
        self.span(token.start, token.end)
    }

    /// The span from `start` to the end of the last consumed token.
    fn span_from(&self, start: u32) -> Span {
        self.span(start, self.last_end)
    }

    /// Consumes a token of `kind`, or reports `expected {what}, found ...` and consumes nothing.
    fn expect(&mut self, kind: TokenKind, what: &str) -> Option<Token> {
        if self.at(kind) {
            Some(self.bump())
        } else {
            self.error_expected(what);
            None
        }
    }

    // ----- errors -----

    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.report(ErrorKind::Syntax, span, message.into());
    }

    fn report(&mut self, kind: ErrorKind, span: Span, message: String) {
        if self.too_deep || self.errors.len() >= MAX_ERRORS {
            return;
        }
        // One error per position: the rest are cascades of the first.
        if self
            .errors
            .last()
            .and_then(Error::span)
            .is_some_and(|last| last.start == span.start)
        {
            return;
        }
        self.errors.push(Error::new(kind, message, span));
    }

    fn error_expected(&mut self, what: &str) {
        let token = self.peek();
        let found = self.describe(token);
        self.error(
            self.token_span(token),
            format!("expected {what}, found {found}"),
        );
    }

    /// Reports a missing closing bracket, pointing also at the opening one: when a `}` is
    /// forgotten the parser only notices much later, often at the end of the file.
    fn error_unclosed(&mut self, open: Token, closing: &str) {
        let token = self.peek();
        let found = self.describe(token);
        let prefix = self.src.get(..open.start as usize).unwrap_or("");
        let line = prefix.matches('\n').count() + 1;
        let column = prefix
            .rsplit('\n')
            .next()
            .map_or(0, |text| text.chars().count())
            + 1;
        let message = format!(
            "expected {closing} to close the '{}' at {line}:{column}, found {found}",
            self.text(open)
        );
        let before = self.errors.len();
        self.error(self.token_span(token), message);
        if self.errors.len() > before
            && let Some(error) = self.errors.last_mut()
        {
            error.spans.push(Span::new(self.file, open.start, open.end));
        }
    }

    /// How a token is named in an error message.
    fn describe(&self, token: Token) -> String {
        match token.kind {
            TokenKind::Eof => "end of file".to_owned(),
            TokenKind::Comma if token.implicit => "newline".to_owned(),
            TokenKind::StrStart => "string literal".to_owned(),
            TokenKind::Attribute => "attribute".to_owned(),
            _ => {
                let text = self.text(token);
                let short: String = text.chars().take(24).collect();
                format!("'{short}'")
            }
        }
    }

    /// Enters one nesting level. Returns false, after reporting once and skipping the rest of
    /// the input, when the nesting is too deep.
    fn enter(&mut self) -> bool {
        if self.too_deep {
            return false;
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let token = self.peek();
            self.error(
                self.token_span(token),
                format!("nesting too deep: more than {MAX_DEPTH} levels"),
            );
            self.too_deep = true;
            self.pos = self.tokens.len().saturating_sub(1);
            self.depth -= 1;
            return false;
        }
        true
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Skips to the end of the current declaration or list element: the next comma or closing
    /// bracket at this nesting level (neither consumed), or the end of file.
    fn skip_to_separator(&mut self) {
        let mut nesting = 0u32;
        loop {
            match self.kind() {
                TokenKind::Eof => return,
                TokenKind::Comma if nesting == 0 => return,
                TokenKind::LBrace | TokenKind::LBrack | TokenKind::LParen => nesting += 1,
                TokenKind::RBrace | TokenKind::RBrack | TokenKind::RParen => {
                    if nesting == 0 {
                        return;
                    }
                    nesting -= 1;
                }
                _ => {}
            }
            self.bump();
        }
    }

    // ----- shared node helpers -----

    fn ident(&self, token: Token) -> ast::Ident {
        ast::Ident {
            name: self.text(token).to_owned(),
            span: self.token_span(token),
        }
    }

    /// A stand-in expression where one could not be parsed (an error is already reported).
    fn placeholder(&self, at: u32) -> ast::Expr {
        ast::Expr::Bottom(self.span(at, at.max(self.last_end)))
    }
}

/// A span from `start` to `end` within `src`, widened to whole characters: escape and number
/// errors compute ends by byte counts that may land inside a multi-byte character.
pub(crate) fn char_span(file: FileId, src: &str, start: u32, end: u32) -> Span {
    let mut start = (start as usize).min(src.len());
    let mut end = (end as usize).clamp(start, src.len());
    while !src.is_char_boundary(start) {
        start -= 1;
    }
    while !src.is_char_boundary(end) {
        end += 1;
    }
    Span::new(file, start as u32, end as u32)
}
