//! Expressions: precedence climbing over the binary operators, unary operators and bounds,
//! primary expressions (selectors, index, slice, calls) and operands (literals, struct and list
//! literals, parentheses).
//!
//! Precedence follows the spec ("Operator precedence"), lowest first: `|`, `&`, `||`, `&&`,
//! relational (`==`, `!=`, `<`, `<=`, `>`, `>=`, `=~`, `!~`), additive, multiplicative. All
//! binary operators are left-associative.

use super::Parser;
use super::lexer::{Token, TokenKind};
use crate::ast;
use crate::span::Span;

/// The deepest an expression tree may get through operator chains and selector chains (`a | b |
/// ...`, `a.b.c...`), on top of nesting. Real disjunctions have a few hundred alternatives at
/// most; the cap keeps recursive walks over the tree (drop, the evaluator) within the stack.
const MAX_CHAIN: u32 = 2000;

/// Whether a token of this kind can start an expression (and so a declaration or a value).
pub(super) fn starts_expr(kind: TokenKind) -> bool {
    use TokenKind::*;
    matches!(
        kind,
        Ident
            | Int
            | Float
            | Bottom
            | StrStart
            | LBrace
            | LBrack
            | LParen
            | Add
            | Sub
            | Not
            | Mul
            | Lss
            | Leq
            | Gtr
            | Geq
            | Neq
            | Mat
            | Nmat
    )
}

/// The first operand of a declaration or field value, before we know whether it is a label.
pub(super) enum Operand {
    Ident(Token),
    Expr(ast::Expr),
    /// `[X=expr]` (`pattern`) or `(X=expr)`: a pattern or dynamic label with an alias for the
    /// concrete label.
    LabelAlias {
        alias: ast::Ident,
        expr: ast::Expr,
        span: Span,
        pattern: bool,
    },
}

fn binary_op(kind: TokenKind) -> Option<(ast::BinaryOp, u8)> {
    use ast::BinaryOp;
    let op = match kind {
        TokenKind::Or => (BinaryOp::Disjunction, 1),
        TokenKind::And => (BinaryOp::Unify, 2),
        TokenKind::LOr => (BinaryOp::Or, 3),
        TokenKind::LAnd => (BinaryOp::And, 4),
        TokenKind::Eql => (BinaryOp::Eq, 5),
        TokenKind::Neq => (BinaryOp::Ne, 5),
        TokenKind::Lss => (BinaryOp::Lt, 5),
        TokenKind::Leq => (BinaryOp::Le, 5),
        TokenKind::Gtr => (BinaryOp::Gt, 5),
        TokenKind::Geq => (BinaryOp::Ge, 5),
        TokenKind::Mat => (BinaryOp::Match, 5),
        TokenKind::Nmat => (BinaryOp::NotMatch, 5),
        TokenKind::Add => (BinaryOp::Add, 6),
        TokenKind::Sub => (BinaryOp::Sub, 6),
        TokenKind::Mul => (BinaryOp::Mul, 7),
        TokenKind::Quo => (BinaryOp::Div, 7),
        _ => return None,
    };
    Some(op)
}

fn unary_op(kind: TokenKind) -> Option<ast::UnaryOp> {
    use ast::UnaryOp;
    let op = match kind {
        TokenKind::Sub => UnaryOp::Neg,
        TokenKind::Add => UnaryOp::Pos,
        TokenKind::Not => UnaryOp::Not,
        TokenKind::Mul => UnaryOp::Default,
        TokenKind::Lss => UnaryOp::Lt,
        TokenKind::Leq => UnaryOp::Le,
        TokenKind::Gtr => UnaryOp::Gt,
        TokenKind::Geq => UnaryOp::Ge,
        TokenKind::Neq => UnaryOp::Ne,
        TokenKind::Mat => UnaryOp::Match,
        TokenKind::Nmat => UnaryOp::NotMatch,
        _ => return None,
    };
    Some(op)
}

impl Parser<'_> {
    /// Parses a full expression.
    pub(super) fn expr(&mut self) -> ast::Expr {
        self.binary(1)
    }

    fn binary(&mut self, min_prec: u8) -> ast::Expr {
        let lhs = self.unary();
        self.binary_rest(lhs, min_prec)
    }

    /// Applies binary operators of precedence `min_prec` or higher to `lhs`.
    fn binary_rest(&mut self, mut lhs: ast::Expr, min_prec: u8) -> ast::Expr {
        let mut grown = 0;
        loop {
            let token = self.peek();
            let (op, prec) = match binary_op(token.kind) {
                Some(op) => (Some(op.0), op.1),
                None if self.is_integer_operator(token) => (None, 7),
                None => break,
            };
            if prec < min_prec || !self.grow_chain(&mut grown) {
                break;
            }
            self.bump();
            let rhs = if starts_expr(self.kind()) {
                self.binary(prec + 1)
            } else {
                self.error_expected("expression after operator");
                self.placeholder(self.last_end)
            };
            let span = lhs.span().to(rhs.span());
            lhs = match op {
                Some(op) => ast::Expr::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                    span,
                },
                // `a div b` is the builtin call `div(a, b)` (likewise `mod`, `quo`, `rem`).
                None => ast::Expr::Call {
                    func: Box::new(ast::Expr::Ident(self.ident(token))),
                    args: vec![lhs, rhs],
                    span,
                },
            };
        }
        self.chain -= grown;
        lhs
    }

    /// The integer operators `div`, `mod`, `quo` and `rem`, written infix like `*` (the Go
    /// implementation still accepts them, and CUE's own tests use them).
    fn is_integer_operator(&self, token: Token) -> bool {
        token.kind == TokenKind::Ident
            && matches!(self.text(token), "div" | "mod" | "quo" | "rem")
            && starts_expr(self.peek_at(1).kind)
    }

    /// Counts one more level of an operator or selector chain; false (after reporting) when
    /// the tree would get too deep.
    fn grow_chain(&mut self, grown: &mut u32) -> bool {
        if self.too_deep {
            return false;
        }
        if self.chain + self.depth >= MAX_CHAIN {
            let token = self.peek();
            self.error(
                self.token_span(token),
                format!("expression too deep: more than {MAX_CHAIN} nested operations"),
            );
            self.too_deep = true;
            self.pos = self.tokens.len().saturating_sub(1);
            return false;
        }
        self.chain += 1;
        *grown += 1;
        true
    }

    /// A unary expression: operators and bounds applied to a primary expression.
    pub(super) fn unary(&mut self) -> ast::Expr {
        if !self.enter() {
            return self.placeholder(self.last_end);
        }
        let expr = match unary_op(self.kind()) {
            Some(op) => {
                let token = self.bump();
                let operand = if starts_expr(self.kind()) {
                    self.unary()
                } else {
                    self.error_expected("operand after unary operator");
                    self.placeholder(self.last_end)
                };
                let span = self.token_span(token).to(operand.span());
                ast::Expr::Unary {
                    op,
                    operand: Box::new(operand),
                    span,
                }
            }
            None => {
                let operand = self.operand();
                self.postfix(operand)
            }
        };
        self.leave();
        expr
    }

    /// Parses the first operand of a declaration or field value (see
    /// [`Parser::field_or_expr`]): a possible label, or else a whole unary expression.
    pub(super) fn label_operand(&mut self) -> Operand {
        match self.kind() {
            TokenKind::Ident => Operand::Ident(self.bump()),
            TokenKind::StrStart => Operand::Expr(self.string_expr()),
            TokenKind::LBrack | TokenKind::LParen
                if self.peek_at(1).kind == TokenKind::Ident
                    && self.peek_at(2).kind == TokenKind::Assign =>
            {
                let open = self.bump();
                let alias_token = self.bump();
                self.bump();
                let alias = self.ident(alias_token);
                let expr = self.expr();
                let pattern = open.kind == TokenKind::LBrack;
                if pattern {
                    self.expect(TokenKind::RBrack, "']' to close the pattern");
                } else {
                    self.expect(TokenKind::RParen, "')' to close the dynamic label");
                }
                Operand::LabelAlias {
                    alias,
                    expr,
                    span: self.span_from(open.start),
                    pattern,
                }
            }
            TokenKind::LParen => Operand::Expr(self.paren()),
            TokenKind::LBrack => Operand::Expr(ast::Expr::List(self.list())),
            _ => Operand::Expr(self.unary()),
        }
    }

    /// Continues an expression whose first operand is already parsed.
    pub(super) fn continue_expr(&mut self, operand: Operand) -> ast::Expr {
        let expr = match operand {
            Operand::Ident(token) => self.ident_expr(token),
            Operand::Expr(expr) => expr,
            Operand::LabelAlias { expr, span, .. } => {
                self.error(
                    span,
                    "alias in '[X=expr]' or '(X=expr)' is only allowed in a label (before ':')",
                );
                expr
            }
        };
        let expr = self.postfix(expr);
        self.binary_rest(expr, 1)
    }

    /// Turns the operand before `:` into a label, or reports why it cannot be one.
    /// The second value is the alias of a `[X=expr]` or `(X=expr)` label.
    pub(super) fn operand_to_label(
        &mut self,
        operand: Operand,
        start: u32,
    ) -> Option<(ast::Label, Option<ast::Ident>)> {
        let label = match operand {
            Operand::Ident(token) => {
                let ident = self.ident(token);
                if ident.name.starts_with("__") {
                    self.error(ident.span, "identifiers starting with '__' are reserved");
                }
                ast::Label::Ident(ident)
            }
            Operand::Expr(ast::Expr::String { parts, span } | ast::Expr::Bytes { parts, span }) => {
                match parts.as_slice() {
                    [] => ast::Label::String(String::new(), span),
                    [ast::StringPart::Lit(text)] => ast::Label::String(text.clone(), span),
                    _ => ast::Label::Dynamic(Box::new(ast::Expr::String { parts, span }), span),
                }
            }
            Operand::Expr(ast::Expr::Paren(inner, span)) => ast::Label::Dynamic(inner, span),
            Operand::Expr(ast::Expr::List(mut list)) => {
                let single = list.elems.len() == 1 && list.ellipsis.is_none();
                match list.elems.pop() {
                    Some(ast::ListElem::Expr(expr)) if single => {
                        ast::Label::Pattern(Box::new(expr), list.span)
                    }
                    Some(ast::ListElem::Comprehension(_)) if single => {
                        self.error(list.span, "comprehension not allowed in a pattern label");
                        return None;
                    }
                    _ => {
                        self.error(
                            list.span,
                            "a pattern label must hold exactly one expression: '[expr]: value'",
                        );
                        return None;
                    }
                }
            }
            Operand::LabelAlias {
                alias,
                expr,
                span,
                pattern,
            } => {
                let label = if pattern {
                    ast::Label::Pattern(Box::new(expr), span)
                } else {
                    ast::Label::Dynamic(Box::new(expr), span)
                };
                return Some((label, Some(alias)));
            }
            Operand::Expr(expr) => {
                let span = self.span(start, expr.span().end);
                self.error(
                    span,
                    "invalid label: expected identifier, string, '(expr)' or '[pattern]' before ':'",
                );
                return None;
            }
        };
        Some((label, None))
    }

    /// An identifier in expression position; `null`, `true`, `false` and `_` are values.
    fn ident_expr(&self, token: Token) -> ast::Expr {
        let span = self.token_span(token);
        match self.text(token) {
            "null" => ast::Expr::Null(span),
            "true" => ast::Expr::Bool(true, span),
            "false" => ast::Expr::Bool(false, span),
            "_" => ast::Expr::Top(span),
            _ => ast::Expr::Ident(self.ident(token)),
        }
    }

    fn operand(&mut self) -> ast::Expr {
        let token = self.peek();
        match token.kind {
            TokenKind::Ident => {
                self.bump();
                self.ident_expr(token)
            }
            TokenKind::Int | TokenKind::Float => {
                self.bump();
                ast::Expr::Number {
                    text: self.text(token).to_owned(),
                    kind: if token.kind == TokenKind::Int {
                        ast::NumberKind::Int
                    } else {
                        ast::NumberKind::Float
                    },
                    span: self.token_span(token),
                }
            }
            TokenKind::Bottom => {
                self.bump();
                ast::Expr::Bottom(self.token_span(token))
            }
            TokenKind::StrStart => self.string_expr(),
            TokenKind::LBrace => ast::Expr::Struct(self.struct_lit()),
            TokenKind::LBrack => ast::Expr::List(self.list()),
            TokenKind::LParen => self.paren(),
            _ => {
                self.error_expected("expression");
                self.placeholder(token.start)
            }
        }
    }

    /// Applies selectors, index and slice expressions and calls.
    fn postfix(&mut self, mut expr: ast::Expr) -> ast::Expr {
        let mut grown = 0;
        loop {
            let kind = self.kind();
            if !matches!(kind, TokenKind::Dot | TokenKind::LBrack | TokenKind::LParen)
                || !self.grow_chain(&mut grown)
            {
                break;
            }
            let start = expr.span().start;
            expr = match kind {
                TokenKind::Dot => {
                    self.bump();
                    match self.selector_label() {
                        Some((label, label_span)) => ast::Expr::Selector {
                            base: Box::new(expr),
                            label,
                            label_span,
                            span: self.span_from(start),
                        },
                        None => break,
                    }
                }
                TokenKind::LBrack => self.index_or_slice(expr, start),
                _ => self.call(expr, start),
            };
        }
        self.chain -= grown;
        expr
    }

    /// The label after `.`: an identifier (`a.b`, `a.#Def`) or a plain string (`a."b-c"`).
    fn selector_label(&mut self) -> Option<(String, Span)> {
        match self.kind() {
            TokenKind::Ident => {
                let token = self.bump();
                Some((self.text(token).to_owned(), self.token_span(token)))
            }
            TokenKind::StrStart => {
                let start = self.peek().start;
                let expr = self.string_expr();
                let span = self.span_from(start);
                match expr {
                    ast::Expr::String { parts, .. } => match parts.as_slice() {
                        [] => Some((String::new(), span)),
                        [ast::StringPart::Lit(text)] => Some((text.clone(), span)),
                        _ => {
                            self.error(span, "selector string must not be interpolated");
                            None
                        }
                    },
                    _ => {
                        self.error(span, "selector must be an identifier or a string");
                        None
                    }
                }
            }
            _ => {
                self.error_expected("identifier or string after '.'");
                None
            }
        }
    }

    fn index_or_slice(&mut self, base: ast::Expr, start: u32) -> ast::Expr {
        self.bump();
        let lo = if self.at(TokenKind::Colon) {
            None
        } else {
            Some(Box::new(self.expr()))
        };
        if self.eat(TokenKind::Colon).is_some() {
            let hi = if self.at(TokenKind::RBrack) {
                None
            } else {
                Some(Box::new(self.expr()))
            };
            self.expect(TokenKind::RBrack, "']' to close the slice");
            ast::Expr::Slice {
                base: Box::new(base),
                lo,
                hi,
                span: self.span_from(start),
            }
        } else {
            self.expect(TokenKind::RBrack, "']' to close the index");
            let index = lo.unwrap_or_else(|| Box::new(self.placeholder(self.last_end)));
            ast::Expr::Index {
                base: Box::new(base),
                index,
                span: self.span_from(start),
            }
        }
    }

    fn call(&mut self, func: ast::Expr, start: u32) -> ast::Expr {
        self.bump();
        let mut args = Vec::new();
        loop {
            self.eat_implicit_comma();
            if self.at(TokenKind::RParen) || self.at(TokenKind::Eof) {
                break;
            }
            if !starts_expr(self.kind()) {
                self.error_expected("argument or ')'");
                self.skip_to_separator();
                if self.eat(TokenKind::Comma).is_none() {
                    break;
                }
                continue;
            }
            args.push(self.expr());
            if self.eat(TokenKind::Comma).is_none() {
                break;
            }
        }
        self.eat_implicit_comma();
        self.expect(TokenKind::RParen, "',' or ')' in argument list");
        ast::Expr::Call {
            func: Box::new(func),
            args,
            span: self.span_from(start),
        }
    }

    /// Skips a comma inserted at a newline before a closing `)`: CUE code breaks long calls
    /// and parenthesized expressions over lines.
    fn eat_implicit_comma(&mut self) {
        if self.at(TokenKind::Comma) && self.peek().implicit {
            self.bump();
        }
    }

    fn paren(&mut self) -> ast::Expr {
        let open = self.bump();
        self.eat_implicit_comma();
        let inner = if starts_expr(self.kind()) {
            self.expr()
        } else {
            self.error_expected("expression after '('");
            self.placeholder(open.end)
        };
        self.eat_implicit_comma();
        if self.eat(TokenKind::RParen).is_none() {
            self.error_unclosed(open, "')'");
            self.skip_to_separator();
            self.eat(TokenKind::RParen);
        }
        ast::Expr::Paren(Box::new(inner), self.span_from(open.start))
    }

    /// `{ decls }`.
    pub(super) fn struct_lit(&mut self) -> ast::StructLit {
        let open = self.bump();
        let decls = self.decls(super::decl::DeclContext::Struct);
        if self.eat(TokenKind::RBrace).is_none() {
            self.error_unclosed(open, "'}'");
        }
        ast::StructLit {
            decls,
            shorthand: false,
            span: self.span_from(open.start),
        }
    }

    /// `[ elems ]` with an optional trailing `...` or `...T`. Elements must be separated by
    /// written commas (spec "Commas": the parser requires explicit commas between elements).
    pub(super) fn list(&mut self) -> ast::ListLit {
        let open = self.bump();
        let mut elems = Vec::new();
        let mut ellipsis = None;
        loop {
            self.eat_implicit_comma();
            match self.kind() {
                TokenKind::RBrack | TokenKind::Eof => break,
                TokenKind::Ellipsis => {
                    self.bump();
                    let element = if starts_expr(self.kind()) {
                        Some(Box::new(self.expr()))
                    } else {
                        None
                    };
                    ellipsis = Some(element);
                    self.eat(TokenKind::Comma);
                    self.eat_implicit_comma();
                    if !self.at(TokenKind::RBrack) {
                        self.error_expected("']' after '...' in list");
                        self.skip_to_list_end();
                    }
                    break;
                }
                kind if starts_expr(kind) => {
                    if self.at_comprehension() {
                        elems.push(ast::ListElem::Comprehension(self.comprehension()));
                    } else {
                        elems.push(ast::ListElem::Expr(self.expr()));
                    }
                }
                _ => {
                    self.error_expected("list element or ']'");
                    self.skip_to_separator();
                    if self.at(TokenKind::Comma) {
                        self.bump();
                        continue;
                    }
                    if !self.at(TokenKind::RBrack) {
                        self.skip_to_list_end();
                    }
                    break;
                }
            }
            match self.kind() {
                TokenKind::Comma => {
                    let comma = self.bump();
                    let next = self.kind();
                    if comma.implicit && next != TokenKind::RBrack && next != TokenKind::Comma {
                        self.error(
                            self.token_span(comma),
                            "missing ',' before newline in list literal",
                        );
                    }
                }
                TokenKind::RBrack => break,
                _ => {
                    self.error_expected("',' or ']' in list");
                    self.skip_to_separator();
                    if self.eat(TokenKind::Comma).is_none() {
                        if !self.at(TokenKind::RBrack) {
                            self.skip_to_list_end();
                        }
                        break;
                    }
                }
            }
        }
        if self.eat(TokenKind::RBrack).is_none() {
            self.error_unclosed(open, "']'");
        }
        ast::ListLit {
            elems,
            ellipsis,
            span: self.span_from(open.start),
        }
    }

    /// Recovery inside a list: skips to its `]` (not consumed) or a closing token of an
    /// enclosing construct.
    fn skip_to_list_end(&mut self) {
        loop {
            self.skip_to_separator();
            match self.kind() {
                TokenKind::Comma => {
                    self.bump();
                }
                _ => return,
            }
        }
    }
}
