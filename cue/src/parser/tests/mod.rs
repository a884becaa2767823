//! Parser unit tests: one test per construct, asserting the AST as a compact S-expression (see
//! `print.rs`), and failing inputs asserting the error message and its line:column.

mod print;

use crate::ast;
use crate::span::{FileId, LineIndex};
use crate::{ErrorKind, parse_file};
use expect_test::{Expect, expect};

/// Parses `source`, asserts it has no errors, and returns the printed declarations.
fn sexp(source: &str) -> String {
    let parsed = parse_file(FileId(0), source);
    assert!(
        parsed.errors.is_empty(),
        "unexpected errors for {source:?}: {}",
        render_errors(source)
    );
    print::file(&parsed.file)
}

fn check(source: &str, expected: Expect) {
    expected.assert_eq(&sexp(source));
}

/// Renders every error as `line:column: message`, one per line.
fn render_errors(source: &str) -> String {
    let parsed = parse_file(FileId(0), source);
    let index = LineIndex::new(source);
    parsed
        .errors
        .iter()
        .map(|error| {
            let at = index.line_col(error.span().map_or(0, |span| span.start));
            let kind = match error.kind {
                ErrorKind::Syntax => "",
                _ => "[unsupported] ",
            };
            format!("{}:{}: {kind}{}", at.line, at.column, error.message)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_errors(source: &str, expected: Expect) {
    expected.assert_eq(&render_errors(source));
}

fn first_field(source: &str) -> ast::Field {
    let parsed = parse_file(FileId(0), source);
    assert!(parsed.errors.is_empty(), "{}", render_errors(source));
    match parsed.file.decls.into_iter().next() {
        Some(ast::Decl::Field(field)) => field,
        other => panic!("expected a field, got {other:?}"),
    }
}

// ----- preamble -----

#[test]
fn package_and_imports() {
    check(
        "package main\n\nimport \"strings\"\nimport (\n\t\"encoding/json\"\n\tyaml \"encoding/yaml\"\n)\n\na: 1\n",
        expect![[r##"
            (package main)
            (import "strings")
            (import "encoding/json")
            (import yaml "encoding/yaml")
            (: a 1)"##]],
    );
    check(
        "import s \"strings\", x: s.ToUpper(\"a\")",
        expect![[r##"
            (import s "strings")
            (: x (call (. s "ToUpper") "a"))"##]],
    );
}

#[test]
fn preamble_keywords_are_labels_elsewhere() {
    check(
        "package: 1\nimport: 2\nx: package + import\n",
        expect![[r##"
            (: package 1)
            (: import 2)
            (: x (+ package import))"##]],
    );
}

#[test]
fn attributes_before_package_and_on_fields() {
    check(
        "@if(prod)\npackage p\na: int @go(A) @json(\"a,omitempty\")\n@decl(x, (y))\n",
        expect![[r##"
            (package p)
            @if(prod)
            (: a int @go(A) @json("a,omitempty"))
            @decl(x, (y))"##]],
    );
}

// ----- fields and labels -----

#[test]
fn field_labels() {
    check(
        "a: 1\n#Def: 2\n_hidden: 3\n_#hid: 4\n\"quoted-label\": 5\n$x: 6\nαβ: 7\n",
        expect![[r##"
            (: a 1)
            (: #Def 2)
            (: _hidden 3)
            (: _#hid 4)
            (: "quoted-label" 5)
            (: $x 6)
            (: αβ 7)"##]],
    );
}

#[test]
fn keywords_as_labels() {
    check(
        "if: 1\nfor: 2\nlet: 3\nin: 4\nnull: 5\ntrue: 6\n",
        expect![[r##"
            (: if 1)
            (: for 2)
            (: let 3)
            (: in 4)
            (: null 5)
            (: true 6)"##]],
    );
}

#[test]
fn optional_and_required_markers() {
    check(
        "a?: int\nb!: string\n\"c\"?: 1\n",
        expect![[r##"
            (?: a int)
            (!: b string)
            (?: "c" 1)"##]],
    );
}

#[test]
fn shorthand_chains_nest() {
    check(
        "a: b: c: 1\nd: e: {f: 2}\n",
        expect![[r##"
            (: a {~ (: b {~ (: c 1)})})
            (: d {~ (: e {(: f 2)})})"##]],
    );
}

#[test]
fn pattern_constraints() {
    check(
        "[string]: int\n[=~\"^x\"]: bool\na: [_]: 1\n",
        expect![[r##"
            (: [string] int)
            (: [(=~ "^x")] bool)
            (: a {~ (: [_] 1)})"##]],
    );
}

#[test]
fn dynamic_labels() {
    check(
        "(k): 1\n\"\\(k)-x\": 2\n(\"a\" + b)?: 3\n",
        expect![[r##"
            (: (dyn k) 1)
            (: (dyn (str \(k) "-x")) 2)
            (?: (dyn (+ "a" b)) 3)"##]],
    );
}

#[test]
fn label_aliases() {
    check(
        "X=a: 1\nY=\"b\": X\nZ=[string]: int\n[N=string]: {name: N}\n(K=k): 1\na: V={x: V.y}\nb: W=[N=_]: c: W=1\n",
        expect![[r#"
            (: X=a 1)
            (: Y="b" X)
            (: Z=[string] int)
            (: [string]<N> {(: name N)})
            (: (dyn k)<K> 1)
            (: a V={(: x (. V "y"))})
            (: b {~ (: W=[_]<N> {~ (: c W=1)})})"#]],
    );
}

#[test]
fn let_clauses_and_embeddings() {
    check(
        "let x = 1 + 2\n#Base\n{a: 1}\n\"text\"\n",
        expect![[r##"
            (let x (+ 1 2))
            (embed #Base)
            (embed {(: a 1)})
            (embed "text")"##]],
    );
}

#[test]
fn ellipsis_in_structs() {
    check(
        "a: {b: 1, ...}\nc: {...}\n",
        expect![[r##"
            (: a {(: b 1) ...})
            (: c {...})"##]],
    );
}

// ----- comprehensions -----

#[test]
fn comprehensions_at_decl_level() {
    check(
        "for k, v in x {\n\t\"\\(k)\": v\n}\nif a > 1 {b: 2}\nfor x in xs\nif x < 4\nlet y = 1 {\n\tz: y\n}\n",
        expect![[r##"
            (comp (for k v x) {(: (dyn (str \(k))) v)})
            (comp (if (> a 1)) {(: b 2)})
            (comp (for x xs) (if (< x 4)) (let y 1) {(: z y)})"##]],
    );
}

#[test]
fn nested_comprehensions_and_comma_separated_clauses() {
    check(
        "for a in as, for b in bs if a != b {\n\tif c\n\t{\n\t\tx: a\n\t}\n}\n",
        expect![[r##"(comp (for a as) (for b bs) (if (!= a b)) {(comp (if c) {(: x a)})})"##]],
    );
}

#[test]
fn comprehensions_in_lists() {
    check(
        "a: [for x in xs if x > 1 {x + 1}]\nb: [1, if c {2}, for y in ys {y}, ...]\n",
        expect![[r##"
            (: a [(comp (for x xs) (if (> x 1)) {(embed (+ x 1))})])
            (: b [1 (comp (if c) {(embed 2)}) (comp (for y ys) {(embed y)}) ...])"##]],
    );
}

// ----- expressions -----

#[test]
fn operator_precedence() {
    check(
        "a: 1 | 2 & 3 || 4 && 5 == 6 + 7 * 8\nb: 1 - 2 - 3\nc: a / b * c\nd: x =~ \"re\" && y !~ \"re\"\ne: a <= b || a >= b || a < b || a > b || a != b\n",
        expect![[r##"
            (: a (| 1 (& 2 (|| 3 (&& 4 (== 5 (+ 6 (* 7 8))))))))
            (: b (- (- 1 2) 3))
            (: c (* (/ a b) c))
            (: d (&& (=~ x "re") (!~ y "re")))
            (: e (|| (|| (|| (|| (<= a b) (>= a b)) (< a b)) (> a b)) (!= a b)))"##]],
    );
}

#[test]
fn unary_operators_and_bounds() {
    check(
        "a: -1\nb: +x\nc: !d\ne: *1 | int\nf: >=0 & <10\ng: !=\"\" & =~\"^a\" & !~\"b$\"\nh: <=1 | >2\n",
        expect![[r##"
            (: a (neg 1))
            (: b (pos x))
            (: c (not d))
            (: e (| (default 1) int))
            (: f (& (>= 0) (< 10)))
            (: g (& (& (!= "") (=~ "^a")) (!~ "b$")))
            (: h (| (<= 1) (> 2)))"##]],
    );
}

#[test]
fn primary_expressions() {
    check(
        "a: x.y.#Def._h\nb: x.\"quoted-sel\"\nc: x[0][\"k\"]\nd: x[1:2]\ne: x[:n]\nf: x[n:]\ng: strings.Join(xs, \",\")\nh: f()\ni: (a + b) * c\nj: len(x,)\n",
        expect![[r##"
            (: a (. (. (. x "y") "#Def") "_h"))
            (: b (. x "quoted-sel"))
            (: c (idx (idx x 0) "k"))
            (: d (slice x 1 2))
            (: e (slice x - n))
            (: f (slice x n -))
            (: g (call (. strings "Join") xs ","))
            (: h (call f))
            (: i (* (paren (+ a b)) c))
            (: j (call len x))"##]],
    );
}

#[test]
fn multi_line_calls_and_parens() {
    check(
        "a: strings.Join([\n\t\"x\",\n\t\"y\",\n], \",\")\nb: f(\n\tx,\n\ty\n)\nc: (\n\tx | y\n)\n",
        expect![[r##"
            (: a (call (. strings "Join") ["x" "y"] ","))
            (: b (call f x y))
            (: c (paren (| x y)))"##]],
    );
}

#[test]
fn value_keywords_top_and_bottom() {
    check(
        "a: null\nb: true\nc: false\nd: _\ne: _|_\nf: _ | _|_\n",
        expect![[r##"
            (: a null)
            (: b true)
            (: c false)
            (: d _)
            (: e _|_)
            (: f (| _ _|_))"##]],
    );
}

#[test]
fn number_literals_keep_text_and_kind() {
    check(
        "a: [0, 42, 1_000_000, 0x1F, 0Xab, 0o755, 0b1010, 1.5, 1., .5, 1e3, 1.5E-3, 6.67e+11, 2Ki, 1.5G, 3M, 4Ti]\n",
        expect![[
            r##"(: a [0 42 1_000_000 0x1F 0Xab 0o755 0b1010 1.5f 1.f .5f 1e3f 1.5E-3f 6.67e+11f 2Ki 1.5G 3M 4Ti])"##
        ]],
    );
}

#[test]
fn lists_and_ellipsis() {
    check(
        "a: []\nb: [1, 2,]\nc: [...int]\nd: [string, ...]\ne: [\n\t1,\n\t2\n]\n",
        expect![[r##"
            (: a [])
            (: b [1 2])
            (: c [(... int)])
            (: d [string ...])
            (: e [1 2])"##]],
    );
}

// ----- strings -----

#[test]
fn string_escapes() {
    check(
        r#"a: "tab\tnl\nq\"bs\\sl\/u\u00e9U\U0001F600 bell\a"
b: 'x\x41\101\'y'
c: "\ud83d\ude00"
"#,
        expect![[r#"
            (: a "tab\tnl\nq\"bs\\sl/uéU😀 bell\u{7}")
            (: b (bytes "xAA'y"))
            (: c "😀")"#]],
    );
}

#[test]
fn raw_strings_with_hashes() {
    check(
        "a: #\"no \\(interp) \\n \"quotes\"\"#\nb: #\"yes \\#(x) \\#n\"#\nc: ##\"a\"#b\"##\n",
        expect![[r##"
            (: a "no \\(interp) \\n \"quotes\"")
            (: b (str "yes " \(x) " \n"))
            (: c "a\"#b")"##]],
    );
}

#[test]
fn interpolation_nests_strings_and_braces() {
    check(
        "a: \"x\\(b + \"y\\(c)\")z\\({d: 1}.d)\"\nb: \"\\(f(\"(\"))\"\n",
        expect![[r##"
            (: a (str "x" \((+ b (str "y" \(c)))) "z" \((. {(: d 1)} "d"))))
            (: b (str \((call f "("))))"##]],
    );
}

#[test]
fn multi_line_strings_strip_closing_indentation() {
    check(
        "a: \"\"\"\n    lily:\n      out of \\(x)\n\n    picking \\\n    bugs\n    \"\"\"\nb: '''\n\tbytes\n\t'''\nc: \"\"\"\n\"\"\"\nd: #\"\"\"\n  raw \\(x) \\#(y)\n  \"\"\"#\n",
        expect![[r##"
            (: a (str "lily:\n  out of " \(x) "\n\npicking bugs"))
            (: b (bytes "bytes"))
            (: c "")
            (: d (str "raw \\(x) " \(y)))"##]],
    );
}

#[test]
fn multi_line_strings_drop_carriage_returns() {
    check(
        "a: \"\"\"\r\n  x\r\n  y\r\n  \"\"\"\r\n",
        expect![[r##"(: a "x\ny")"##]],
    );
}

// ----- commas -----

#[test]
fn implicit_and_explicit_commas() {
    check(
        "a: 1, b: 2\nc: {d: 1, e: 2}\nf: {\n\tg: 1\n\th: 2\n}\ni: x &\n\ty\n",
        expect![[r##"
            (: a 1)
            (: b 2)
            (: c {(: d 1) (: e 2)})
            (: f {(: g 1) (: h 2)})
            (: i (& x y))"##]],
    );
}

// ----- comments -----

#[test]
fn doc_comments_attach_to_fields() {
    let field = first_field("// first line\n//second\n//   indented\na: 1 // trailing\n");
    assert_eq!(field.doc, vec!["first line", "second", "  indented"]);
    check(
        "// lost: blank line below\n\na: 1 // not a doc\nb: 2\n// doc of c\nc: {\n\t// doc of d\n\td: 1 // trailing\n\t// dangling\n}\n",
        expect![[r##"
            (: a 1)
            (: b 2)
            (: c {(: d 1 #doc["doc of d"])} #doc["doc of c"])"##]],
    );
}

#[test]
fn doc_comment_of_a_shorthand_chain_goes_to_the_innermost_field() {
    check(
        "// +patchStrategy=retainKeys\npatch: spec: replicas: 1\n// +patchKey=name\na: b: {\n\tc: 1\n}\n",
        expect![[r##"
            (: patch {~ (: spec {~ (: replicas 1 #doc["+patchStrategy=retainKeys"])})})
            (: a {~ (: b {(: c 1)} #doc["+patchKey=name"])})"##]],
    );
}

#[test]
fn doc_comments_in_comprehension_bodies_are_kept() {
    check(
        "if x {\n\t// +patchKey=name\n\tcontainers: [...]\n}\n",
        expect![[r##"(comp (if x) {(: containers [...] #doc["+patchKey=name"])})"##]],
    );
}

// ----- errors -----

#[test]
fn error_missing_value() {
    check_errors(
        "a: {\n\tb:\n}\n",
        expect!["3:1: expected field value after ':', found '}'"],
    );
    check_errors(
        "a: }\n",
        expect!["1:4: expected field value after ':', found '}'"],
    );
}

#[test]
fn error_unclosed_struct_and_list() {
    check_errors(
        "a: {\n\tb: 1\n",
        expect!["3:1: expected '}' to close the '{' at 1:4, found end of file"],
    );
    check_errors(
        "a: [1, 2\nb: 3\n",
        expect![[r#"
            1:9: missing ',' before newline in list literal
            2:2: expected ',' or ']' in list, found ':'
            3:1: expected ']' to close the '[' at 1:4, found end of file"#]],
    );
}

#[test]
fn error_recovery_keeps_later_declarations() {
    let source = "a: 1 2\nb: )\nc: 3\n";
    check_errors(
        source,
        expect![[r##"
            1:6: expected ',' or newline after declaration, found '2'
            2:4: expected field value after ':', found ')'"##]],
    );
    let parsed = parse_file(FileId(0), source);
    let printed = print::file(&parsed.file);
    assert!(printed.ends_with("(: c 3)"), "{printed}");
}

#[test]
fn error_bad_tokens() {
    check_errors("a: 1 ~ 2\n", expect!["1:6: illegal character '~'"]);
    check_errors("a: 0x\n", expect!["1:4: invalid number literal '0x'"]);
    check_errors("a: 12abc\n", expect!["1:4: invalid number literal '12abc'"]);
    check_errors("a: #1\n", expect!["1:4: illegal character '#'"]);
}

#[test]
fn error_strings() {
    check_errors(
        "a: \"abc\nb: 1\n",
        expect!["1:5: string literal not terminated"],
    );
    check_errors(
        "a: \"\\q\"\n",
        expect!["1:5: unknown escape sequence '\\q'"],
    );
    check_errors(
        "a: \"\\x41\"\n",
        expect!["1:5: hexadecimal and octal escapes are only allowed in bytes literals ('...')"],
    );
    check_errors(
        "a: \"\\u12\"\n",
        expect!["1:5: invalid escape: '\\u' needs 4 hex digits"],
    );
    check_errors(
        "a: \"\"\"\n  x\n y\n  \"\"\"\n",
        expect![
            "3:1: invalid indentation in multi-line string: lines must start with the indentation of the closing quotes"
        ],
    );
    // CUE v0.14 accepts text before the closing quotes (and strips no indentation).
    check_errors("a: \"\"\"\n  x\"\"\"\n", expect![""]);
    check_errors(
        "a: \"\"\"x\n\"\"\"\n",
        expect!["1:4: expected newline after multi-line quote"],
    );
    check_errors(
        "a: \"\\(b\"\n",
        expect![[r#"
        1:8: expected ')' to close the interpolation, found string literal
        1:9: string literal not terminated
        2:1: unexpected end of file in string literal"#]],
    );
}

#[test]
fn error_operators_and_operands() {
    check_errors(
        "a: (1 + 2\nb: 3\n",
        expect!["2:1: expected ')' to close the '(' at 1:4, found 'b'"],
    );
    check_errors(
        "a: 1 +\n",
        expect!["2:1: expected expression after operator, found end of file"],
    );
    check_errors(
        "a: -\n",
        expect!["2:1: expected operand after unary operator, found end of file"],
    );
    check_errors(
        "a: x.\n",
        expect!["2:1: expected identifier or string after '.', found end of file"],
    );
    check_errors(
        "a: x[1\n",
        expect!["1:7: expected ']' to close the index, found newline"],
    );
    check_errors(
        "a: f(1 2)\n",
        expect!["1:8: expected ',' or ')' in argument list, found '2'"],
    );
}

#[test]
fn error_labels() {
    check_errors(
        "1: 2\n",
        expect![
            "1:1: invalid label: expected identifier, string, '(expr)' or '[pattern]' before ':'"
        ],
    );
    check_errors(
        "[a, b]: 2\n",
        expect!["1:1: a pattern label must hold exactly one expression: '[expr]: value'"],
    );
    check_errors(
        "a: [X=string]\n",
        expect!["1:4: alias in '[X=expr]' or '(X=expr)' is only allowed in a label (before ':')"],
    );
    check_errors(
        "(X=k)\n",
        expect!["1:1: alias in '[X=expr]' or '(X=expr)' is only allowed in a label (before ':')"],
    );
    check_errors(
        "X={b: 1}\n",
        expect![
            "1:1: [unsupported] unsupported: alias on an embedding ('X=expr'); aliases go on labels ('X=label: value') or field values ('label: X=value')"
        ],
    );
}

#[test]
fn error_comprehensions() {
    check_errors(
        "for x xs {}\n",
        expect!["1:7: expected 'in' in for clause, found 'xs'"],
    );
    check_errors(
        "if x\na: 1\n",
        expect!["1:5: expected '{' after comprehension clauses, found newline"],
    );
    check_errors(
        "for in {}\n",
        expect!["1:8: expected 'in' in for clause, found '{'"],
    );
}

#[test]
fn error_imports_and_attributes() {
    check_errors(
        "import (\n\t\"a\" \"b\"\n)\n",
        expect!["2:6: expected ',' or ')' in import list, found string literal"],
    );
    check_errors(
        "a: 1 @foo\n",
        expect!["1:6: expected '(' after attribute name"],
    );
    check_errors("a: 1 @foo(bar\n", expect!["1:6: attribute not terminated"]);
}

#[test]
fn error_depth_is_capped_without_overflow() {
    let deep = format!("a: {}1{}\n", "(".repeat(5000), ")".repeat(5000));
    let parsed = parse_file(FileId(0), &deep);
    assert_eq!(parsed.errors.len(), 1, "{:?}", parsed.errors);
    assert!(parsed.errors[0].message.starts_with("nesting too deep"));
    let structs = format!("a: {}\n", "{b: ".repeat(5000));
    let parsed = parse_file(FileId(0), &structs);
    assert!(parsed.errors[0].message.starts_with("nesting too deep"));
    let chain = format!("a: {}1\n", "b: ".repeat(5000));
    let parsed = parse_file(FileId(0), &chain);
    assert!(parsed.errors[0].message.starts_with("nesting too deep"));
    let long = format!("a: 1{}\n", " | 1".repeat(50_000));
    let parsed = parse_file(FileId(0), &long);
    assert!(parsed.errors[0].message.starts_with("expression too deep"));
    let strings = format!("a: {}\n", "\"\\(".repeat(5000));
    let parsed = parse_file(FileId(0), &strings);
    assert!(!parsed.errors.is_empty());
}

#[test]
fn spans_cover_nodes() {
    let source = "a: b: 1 + 2\n";
    let field = first_field(source);
    assert_eq!((field.span.start, field.span.end), (0, 11));
    let ast::Expr::Struct(lit) = &field.value else {
        panic!("expected shorthand struct")
    };
    assert_eq!((lit.span.start, lit.span.end), (3, 11));
    let ast::Decl::Field(inner) = &lit.decls[0] else {
        panic!("expected field")
    };
    assert_eq!((inner.value.span().start, inner.value.span().end), (6, 11));
}

#[test]
fn front_style_commas_and_colons_continue_the_line() {
    check(
        "a\n: { \"key\": \"value\"\n, \"key2\"\n: \"value2\"\n}\n",
        expect![[r#"(: a {(: "key" "value") (: "key2" "value2")})"#]],
    );
}

#[test]
fn lone_hash_is_an_identifier() {
    check(
        "#: 1\nx: #\n",
        expect![[r#"
            (: # 1)
            (: x #)"#]],
    );
}

#[test]
fn infix_integer_operators_are_builtin_calls() {
    check(
        "a: 7 div 2 + 1\nb: 7 mod 2 * 3 quo 1 rem 2\nc: x.div\n",
        expect![[r#"
            (: a (+ (call div 7 2) 1))
            (: b (call rem (call quo (* (call mod 7 2) 3) 1) 2))
            (: c (. x "div"))"#]],
    );
}

#[test]
fn bytes_literal_labels() {
    check("'b': 2\n", expect![[r#"(: "b" 2)"#]]);
}

#[test]
fn error_rejections_matching_cue() {
    check_errors(
        "a: 0755\n",
        expect!["1:4: illegal integer literal '0755': use '0o' for octal"],
    );
    check_errors(
        "__x: 1\n",
        expect!["1:1: identifiers starting with '__' are reserved"],
    );
    check_errors(
        "let x = 1\nlet x = 2\n",
        expect!["2:5: let 'x' redeclared in the same scope"],
    );
    check_errors(
        "a: {...int}\n",
        expect![
            "1:5: '...T' is not allowed in a struct literal (CUE v0.14 only accepts a bare '...'); use a pattern constraint '[string]: T'"
        ],
    );
    check_errors(
        "a: \"\\uD800\"\n",
        expect!["1:5: unmatched surrogate pair in escape"],
    );
    check_errors(
        "a: [1, ...int, 2]\n",
        expect!["1:16: expected ']' after '...' in list, found '2'"],
    );
}

#[test]
fn doc_comments_only_attach_to_fields() {
    check(
        "// not on a let\nlet x = 1\n// not on an embedding\n#Base\n// not on a comprehension\nif x {\n\ta: 1\n}\n// belongs to the attribute\n@attr()\nb: 2\n// doc\n@attr()\n\nc: 3\n",
        expect![[r#"
            (let x 1)
            (embed #Base)
            (comp (if x) {(: a 1)})
            @attr()
            (: b 2)
            @attr()
            (: c 3)"#]],
    );
}

#[test]
fn doc_comment_of_an_aliased_or_optional_field() {
    check(
        "// aliased\nX=a?: 1\n// pattern\n[string]: int\n",
        expect![[r#"
            (?: X=a 1 #doc["aliased"])
            (: [string] int #doc["pattern"])"#]],
    );
}

#[test]
fn error_let_and_package_clauses() {
    check_errors(
        "let x 1\n",
        expect!["1:7: expected '=' in let clause, found '1'"],
    );
    check_errors(
        "package 1\n",
        expect!["1:9: expected ',' or newline after declaration, found '1'"],
    );
    check_errors(
        "a: {\n\tlet y = \n}\n",
        expect!["3:1: expected expression, found '}'"],
    );
}
