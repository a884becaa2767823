//! The CUE parser. FIXME(#2): placeholder until the real parser lands.

use crate::ast;
use crate::span::{FileId, Span};
use crate::{Error, ErrorKind};

/// A parsed file and the syntax errors found while parsing it. The parser recovers, so `file`
/// holds every declaration it could read even when `errors` is not empty.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub file: ast::File,
    pub errors: Vec<Error>,
}

/// Parses one CUE source text. Spans are byte offsets into `source`, tagged with `file`.
pub fn parse_file(file: FileId, source: &str) -> Parsed {
    let span = Span::new(file, 0, source.len() as u32);
    Parsed {
        file: ast::File {
            package: None,
            imports: Vec::new(),
            decls: Vec::new(),
            span,
        },
        errors: vec![Error::new(ErrorKind::Unsupported, "unsupported: parser not implemented", span)],
    }
}
