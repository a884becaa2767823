//! Declarations: the file preamble (attributes before the package clause, package clause,
//! imports), lists of declarations in files and structs, let clauses, comprehensions and their
//! clauses, and fields (labels, aliases, `:` / `?:` / `!:` markers, values, attributes).
//!
//! A label is parsed as an operand first (see `expr.rs`) and becomes a label only if a field
//! marker follows; doc comments are attached to the field a shorthand chain ends in.

use super::lexer::{Token, TokenKind};
use super::{Parser, expr};
use crate::ErrorKind;
use crate::ast;

/// What [`Parser::field_or_expr`] found.
enum FieldOrExpr {
    Field(ast::Field),
    Expr(ast::Expr),
    /// `X=expr`: an aliased value (in a field value) or embedding.
    Aliased(ast::Ident, ast::Expr),
}

/// Where a list of declarations ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum DeclContext {
    File,
    Struct,
}

impl Parser<'_> {
    // ----- file level -----

    pub(super) fn file(&mut self, source: &str) -> ast::File {
        let mut decls = Vec::new();
        // Attributes may precede the package clause (`@if(tag)` build constraints).
        let attributes_before_package = self.preamble_follows_attributes();
        while attributes_before_package && self.at(TokenKind::Attribute) {
            let token = self.bump();
            decls.push(ast::Decl::Attribute(self.attribute(token)));
            self.eat(TokenKind::Comma);
        }
        let package = self.package_clause();
        let imports = self.imports();
        decls.extend(self.decls(DeclContext::File));
        ast::File {
            package,
            imports,
            decls,
            span: self.span(0, source.len() as u32),
            compile_checks: ast::CompileChecks::default(),
        }
    }

    /// Whether the attributes at the cursor are followed by a `package` clause.
    fn preamble_follows_attributes(&self) -> bool {
        let mut ahead = 0;
        loop {
            let token = self.peek_at(ahead);
            match token.kind {
                TokenKind::Attribute | TokenKind::Comma => ahead += 1,
                TokenKind::Ident => {
                    return self.is_keyword(token, "package")
                        && self.peek_at(ahead + 1).kind == TokenKind::Ident;
                }
                _ => return false,
            }
        }
    }

    fn package_clause(&mut self) -> Option<ast::Ident> {
        let token = self.peek();
        if !self.is_keyword(token, "package") || self.peek_at(1).kind != TokenKind::Ident {
            return None;
        }
        self.bump();
        let name_token = self.bump();
        let name = self.ident(name_token);
        self.end_of_preamble_line();
        Some(name)
    }

    fn imports(&mut self) -> Vec<ast::Import> {
        let mut imports = Vec::new();
        loop {
            let token = self.peek();
            let next = self.peek_at(1).kind;
            if !self.is_keyword(token, "import")
                || !matches!(
                    next,
                    TokenKind::StrStart | TokenKind::LParen | TokenKind::Ident
                )
            {
                return imports;
            }
            // `import: x` or `import (x): y` would be fields; `import` followed by an
            // identifier and `:` as well.
            if next == TokenKind::Ident && self.peek_at(2).kind != TokenKind::StrStart {
                return imports;
            }
            self.bump();
            if self.eat(TokenKind::LParen).is_some() {
                loop {
                    match self.kind() {
                        TokenKind::RParen | TokenKind::Eof => break,
                        TokenKind::Comma => {
                            self.bump();
                        }
                        _ => {
                            let before = self.pos;
                            if let Some(import) = self.import_spec() {
                                imports.push(import);
                            }
                            if !matches!(self.kind(), TokenKind::Comma | TokenKind::RParen) {
                                self.error_expected("',' or ')' in import list");
                                self.skip_to_separator();
                            }
                            if self.pos == before {
                                self.bump();
                            }
                        }
                    }
                }
                self.expect(TokenKind::RParen, "')' to close the import list");
            } else if let Some(import) = self.import_spec() {
                imports.push(import);
            }
            self.end_of_preamble_line();
        }
    }

    fn import_spec(&mut self) -> Option<ast::Import> {
        let start = self.peek().start;
        let alias = self.eat(TokenKind::Ident).map(|token| self.ident(token));
        if !self.at(TokenKind::StrStart) {
            self.error_expected("import path string");
            return None;
        }
        let path_start = self.peek().start;
        let path = match self.string_expr() {
            ast::Expr::String { parts, .. } => match parts.as_slice() {
                [] => String::new(),
                [ast::StringPart::Lit(text)] => text.clone(),
                _ => {
                    let span = self.span_from(path_start);
                    self.error(span, "import path must not be interpolated");
                    String::new()
                }
            },
            _ => {
                let span = self.span_from(path_start);
                self.error(span, "import path must be a double-quoted string");
                String::new()
            }
        };
        Some(ast::Import {
            alias,
            path,
            span: self.span_from(start),
        })
    }

    /// After the package clause or an import: a comma or newline, or the end of the file.
    fn end_of_preamble_line(&mut self) {
        if self.eat(TokenKind::Comma).is_none() && !self.at(TokenKind::Eof) {
            self.error_expected("newline after package or import clause");
            self.skip_to_separator();
            self.eat(TokenKind::Comma);
        }
    }

    // ----- declarations -----

    /// Parses declarations up to `}` (not consumed) or the end of file.
    pub(super) fn decls(&mut self, context: DeclContext) -> Vec<ast::Decl> {
        let mut decls = Vec::new();
        // CUE rejects two lets of the same name in one struct. Only membership is asked, so
        // hash order cannot reach any output.
        let mut let_names = std::collections::HashSet::new();
        loop {
            match self.kind() {
                TokenKind::Eof => break,
                TokenKind::RBrace if context == DeclContext::Struct => break,
                TokenKind::Comma => {
                    let token = self.bump();
                    if !token.implicit {
                        self.error(
                            self.token_span(token),
                            "unexpected ',': expected declaration",
                        );
                    }
                    continue;
                }
                _ => {}
            }
            let before = self.pos;
            let decl = self.decl();
            if self.pos == before {
                // Nothing could be read here; the error is reported, move on.
                self.bump();
                continue;
            }
            if let Some(decl) = decl {
                if let ast::Decl::Let(clause) = &decl
                    && !let_names.insert(clause.name.name.clone())
                {
                    self.error(
                        clause.name.span,
                        format!("let '{}' redeclared in the same scope", clause.name.name),
                    );
                }
                decls.push(decl);
            }
            match self.kind() {
                TokenKind::Comma => {
                    self.bump();
                }
                TokenKind::Eof => {}
                TokenKind::RBrace if context == DeclContext::Struct => {}
                _ => {
                    let what = match context {
                        DeclContext::File => "',' or newline after declaration",
                        DeclContext::Struct => "',' or '}' after declaration",
                    };
                    self.error_expected(what);
                    self.skip_to_separator();
                    if context == DeclContext::File && !self.at(TokenKind::Eof) {
                        // A stray closing bracket at file level: step over it.
                        self.bump();
                    }
                }
            }
        }
        decls
    }

    fn decl(&mut self) -> Option<ast::Decl> {
        let token = self.peek();
        match token.kind {
            TokenKind::Ellipsis => {
                self.bump();
                let value = if expr::starts_expr(self.kind()) {
                    let value = self.expr();
                    // The spec allows `...T` in structs, but CUE v0.14 rejects it ("missing ','
                    // in struct literal"), and so must we: KubeVela would fail on it.
                    self.error(
                        self.span_from(token.start),
                        "'...T' is not allowed in a struct literal (CUE v0.14 only accepts a \
                         bare '...'); use a pattern constraint '[string]: T'",
                    );
                    Some(value)
                } else {
                    None
                };
                Some(ast::Decl::Ellipsis(value, self.span_from(token.start)))
            }
            TokenKind::Attribute => {
                self.bump();
                Some(ast::Decl::Attribute(self.attribute(token)))
            }
            TokenKind::Ident if self.at_let_clause() => Some(ast::Decl::Let(self.let_clause())),
            TokenKind::Ident if self.at_comprehension() => {
                Some(ast::Decl::Comprehension(self.comprehension()))
            }
            kind if expr::starts_expr(kind) => {
                let doc = self.doc_lines(token);
                match self.field_or_expr()? {
                    FieldOrExpr::Field(mut field) => {
                        set_doc(&mut field, doc);
                        Some(ast::Decl::Field(field))
                    }
                    FieldOrExpr::Expr(expr) => Some(ast::Decl::Embed(expr)),
                    FieldOrExpr::Aliased(alias, expr) => {
                        // The spec reserves `X=expr` embeddings but no CUE version has
                        // given them a meaning.
                        let span = alias.span.to(expr.span());
                        self.report(
                            ErrorKind::Unsupported,
                            span,
                            "unsupported: alias on an embedding ('X=expr'); aliases go on \
                             labels ('X=label: value') or field values ('label: X=value')"
                                .to_owned(),
                        );
                        Some(ast::Decl::Embed(expr))
                    }
                }
            }
            _ => {
                self.error_expected("declaration");
                None
            }
        }
    }

    /// The doc comment lines attached to `token`, with `//` and one following space removed.
    fn doc_lines(&self, token: Token) -> Vec<String> {
        let Some(&(first, last)) = token
            .doc
            .checked_sub(1)
            .and_then(|index| self.doc_groups.get(index as usize))
        else {
            return Vec::new();
        };
        let comments = self
            .comments
            .get(first as usize..last as usize)
            .unwrap_or(&[]);
        comments
            .iter()
            .map(|&(start, end)| {
                let text = self.src.get(start as usize..end as usize).unwrap_or("");
                let text = text.strip_prefix("//").unwrap_or(text);
                let text = text.strip_prefix(' ').unwrap_or(text);
                text.strip_suffix('\r').unwrap_or(text).to_owned()
            })
            .collect()
    }

    /// `let x = ...` (and not a field named `let`).
    fn at_let_clause(&self) -> bool {
        self.is_keyword(self.peek(), "let") && self.peek_at(1).kind == TokenKind::Ident
    }

    /// `for x in ...` or `if cond` starting a comprehension (and not a field named `for`/`if`).
    pub(super) fn at_comprehension(&self) -> bool {
        let token = self.peek();
        let next = self.peek_at(1);
        if self.is_keyword(token, "for") {
            return next.kind == TokenKind::Ident;
        }
        if self.is_keyword(token, "if") {
            let marker_then_colon = matches!(next.kind, TokenKind::Question | TokenKind::Not)
                && self.peek_at(2).kind == TokenKind::Colon;
            return expr::starts_expr(next.kind)
                && next.kind != TokenKind::Colon
                && !marker_then_colon;
        }
        false
    }

    fn let_clause(&mut self) -> ast::LetClause {
        let start = self.bump().start;
        let name_token = self.bump();
        let name = self.ident(name_token);
        self.expect(TokenKind::Assign, "'=' in let clause");
        let value = self.expr();
        ast::LetClause {
            name,
            value,
            span: self.span_from(start),
        }
    }

    /// `for ... in ... / if ... / let ...` clauses and the struct body.
    pub(super) fn comprehension(&mut self) -> ast::Comprehension {
        let start = self.peek().start;
        let mut clauses = Vec::new();
        loop {
            let token = self.peek();
            if self.is_keyword(token, "for") {
                clauses.push(self.for_clause());
            } else if self.is_keyword(token, "if") {
                self.bump();
                let condition = self.expr();
                clauses.push(ast::Clause::If {
                    condition,
                    span: self.span_from(token.start),
                });
            } else if self.is_keyword(token, "let") {
                if self.at_let_clause() {
                    clauses.push(ast::Clause::Let(self.let_clause()));
                } else {
                    self.bump();
                    self.error_expected("identifier and '=' after 'let'");
                }
            } else {
                break;
            }
            // Clauses may be separated by commas, written or inserted at a newline.
            if self.at(TokenKind::Comma) {
                let next = self.peek_at(1);
                if ["for", "if", "let"]
                    .iter()
                    .any(|keyword| self.is_keyword(next, keyword))
                {
                    self.bump();
                }
            }
        }
        // The body may start on the next line (`for x in xs\n{`), as in Go.
        if self.at(TokenKind::Comma)
            && self.peek().implicit
            && self.peek_at(1).kind == TokenKind::LBrace
        {
            self.bump();
        }
        let body = if self.at(TokenKind::LBrace) {
            self.struct_lit()
        } else {
            self.error_expected("'{' after comprehension clauses");
            ast::StructLit {
                decls: Vec::new(),
                shorthand: false,
                span: self.span(self.last_end, self.last_end),
            }
        };
        ast::Comprehension {
            clauses,
            body,
            span: self.span_from(start),
        }
    }

    fn for_clause(&mut self) -> ast::Clause {
        let start = self.bump().start;
        let first = self.ident_or_error("identifier after 'for'");
        let (key, value) = if self.at(TokenKind::Comma) && !self.peek().implicit {
            self.bump();
            let second = self.ident_or_error("identifier after ','");
            (first, second)
        } else {
            (None, first)
        };
        let value = value.unwrap_or_else(|| ast::Ident {
            name: "_".to_owned(),
            span: self.span(self.last_end, self.last_end),
        });
        let source = if self.is_keyword(self.peek(), "in") {
            self.bump();
            self.expr()
        } else {
            self.error_expected("'in' in for clause");
            if expr::starts_expr(self.kind()) && !self.at(TokenKind::LBrace) {
                self.expr()
            } else {
                self.placeholder(self.last_end)
            }
        };
        ast::Clause::For {
            key,
            value,
            source,
            span: self.span_from(start),
        }
    }

    fn ident_or_error(&mut self, what: &str) -> Option<ast::Ident> {
        if self.at(TokenKind::Ident) {
            let token = self.bump();
            Some(self.ident(token))
        } else {
            self.error_expected(what);
            None
        }
    }

    fn attribute(&self, token: Token) -> ast::Attribute {
        let text = self.text(token);
        let inner = text.strip_prefix('@').unwrap_or(text);
        let (name, body) = match inner.split_once('(') {
            Some((name, rest)) => (name, rest.strip_suffix(')').unwrap_or(rest)),
            None => (inner, ""),
        };
        ast::Attribute {
            name: name.to_owned(),
            body: body.to_owned(),
            span: self.token_span(token),
        }
    }

    // ----- fields -----

    /// Parses what starts a declaration or a field value: a field (`label: value`, possibly a
    /// shorthand chain) or an expression. Labels are operands (`a`, `"a"`, `(a)`, `[a]`), so the
    /// operand is parsed first and becomes a label if `:` (or `?:`, `!:`) follows; otherwise it
    /// continues as an expression, without re-parsing.
    fn field_or_expr(&mut self) -> Option<FieldOrExpr> {
        if !self.enter() {
            return None;
        }
        let result = self.field_or_expr_inner();
        self.leave();
        Some(result)
    }

    fn field_or_expr_inner(&mut self) -> FieldOrExpr {
        let start = self.peek();
        // `X=label: value` (label alias) or `X=expr` (value alias).
        if start.kind == TokenKind::Ident && self.peek_at(1).kind == TokenKind::Assign {
            self.bump();
            self.bump();
            let alias = self.ident(start);
            let operand_start = self.peek().start;
            let operand = self.label_operand();
            if let Some(constraint) = self.field_marker() {
                let Some((label, label_expr_alias)) = self.operand_to_label(operand, operand_start)
                else {
                    return self.field_after_bad_label(constraint, start.start);
                };
                let label = ast::Label::Alias(alias, Box::new(label));
                let mut field = self.field_rest(label, constraint, start.start);
                field.label_expr_alias = label_expr_alias;
                return FieldOrExpr::Field(field);
            }
            let expr = self.continue_expr(operand);
            return FieldOrExpr::Aliased(alias, expr);
        }
        let operand = self.label_operand();
        if let Some(constraint) = self.field_marker() {
            let Some((label, label_expr_alias)) = self.operand_to_label(operand, start.start)
            else {
                return self.field_after_bad_label(constraint, start.start);
            };
            let mut field = self.field_rest(label, constraint, start.start);
            field.label_expr_alias = label_expr_alias;
            return FieldOrExpr::Field(field);
        }
        FieldOrExpr::Expr(self.continue_expr(operand))
    }

    /// After a label that was reported as invalid: parses the value anyway, so the error does
    /// not cascade, and yields a placeholder.
    fn field_after_bad_label(
        &mut self,
        constraint: ast::FieldConstraint,
        start: u32,
    ) -> FieldOrExpr {
        let label = ast::Label::String(String::new(), self.span(start, start));
        self.field_rest(label, constraint, start);
        FieldOrExpr::Expr(self.placeholder(start))
    }

    /// Parses `: value {attr}` after a label.
    fn field_rest(
        &mut self,
        label: ast::Label,
        constraint: ast::FieldConstraint,
        start: u32,
    ) -> ast::Field {
        let mut value_alias = None;
        let value = if expr::starts_expr(self.kind()) {
            match self.field_or_expr() {
                Some(FieldOrExpr::Field(inner)) => {
                    let span = inner.span;
                    ast::Expr::Struct(ast::StructLit {
                        decls: vec![ast::Decl::Field(inner)],
                        shorthand: true,
                        span,
                    })
                }
                Some(FieldOrExpr::Expr(expr)) => expr,
                Some(FieldOrExpr::Aliased(alias, expr)) => {
                    value_alias = Some(alias);
                    expr
                }
                None => self.placeholder(self.last_end),
            }
        } else {
            self.error_expected("field value after ':'");
            self.placeholder(self.last_end)
        };
        let mut attrs = Vec::new();
        while self.at(TokenKind::Attribute) {
            let token = self.bump();
            attrs.push(self.attribute(token));
        }
        ast::Field {
            label,
            constraint,
            value,
            attrs,
            doc: Vec::new(),
            span: self.span_from(start),
            label_expr_alias: None,
            value_alias,
        }
    }

    /// Consumes `:`, `?:` or `!:` and says which, or consumes nothing.
    fn field_marker(&mut self) -> Option<ast::FieldConstraint> {
        let constraint = match (self.kind(), self.peek_at(1).kind) {
            (TokenKind::Colon, _) => ast::FieldConstraint::Regular,
            (TokenKind::Question, TokenKind::Colon) => ast::FieldConstraint::Optional,
            (TokenKind::Not, TokenKind::Colon) => ast::FieldConstraint::Required,
            _ => return None,
        };
        if constraint != ast::FieldConstraint::Regular {
            self.bump();
        }
        self.bump();
        Some(constraint)
    }
}

/// Gives `doc` to the field a shorthand chain `a: b: c: v` ends in (`c`), or to the field itself.
/// A chain is a single-field shorthand struct literal in the value, recursively; CUE's
/// `ExtractDoc` attaches the comment there (kubevela-render-semantics.md §2.2).
fn set_doc(field: &mut ast::Field, doc: Vec<String>) {
    if let ast::Expr::Struct(lit) = &mut field.value
        && lit.shorthand
        && let [ast::Decl::Field(inner)] = lit.decls.as_mut_slice()
    {
        set_doc(inner, doc);
        return;
    }
    field.doc = doc;
}
