//! The evaluator's public API beyond JSON export: lookup, fields, doc comments, validate,
//! the syntax-like export used by trait patching, injections, and the unsupported-construct
//! contract.

use cue::{ErrorKind, Exported, KindSet};

fn eval(source: &str) -> cue::Value {
    let parsed = cue::parse_file(cue::FileId(0), source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    cue::Evaluator::new().evaluate(&[&parsed.file], &[])
}

#[test]
fn evaluator_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<cue::Evaluator>();
}

#[test]
fn docs_come_from_the_defining_fields() {
    let value = eval(
        "patch: spec: {\n\t// +patchKey=name\n\tcontainers: [{name: \"a\"}]\n}\n// +patchStrategy=retainKeys\nshort: a: b: 1\nx: {\n\t// first\n\ty: 1\n}\nx: {\n\t// second\n\ty: 1\n}\n",
    );
    let containers = value.lookup(&["patch", "spec", "containers"]).unwrap();
    assert_eq!(containers.doc(), vec!["+patchKey=name".to_owned()]);
    // A doc comment before a shorthand chain belongs to the innermost field.
    assert_eq!(
        value.lookup(&["short", "a", "b"]).unwrap().doc(),
        vec!["+patchStrategy=retainKeys".to_owned()]
    );
    assert!(value.lookup(&["short"]).unwrap().doc().is_empty());
    // Several conjuncts: docs of all of them.
    assert_eq!(
        value.lookup(&["x", "y"]).unwrap().doc(),
        vec!["first".to_owned(), "second".to_owned()]
    );
}

#[test]
fn fields_iterates_regular_fields_in_order() {
    let value = eval("b: 1\na: 2\n_h: 3\n#D: 4\no?: 5\nr: {x: 1}\n");
    let labels: Vec<String> = value.fields().into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["b", "a", "r"]);
    assert_eq!(
        value.lookup(&["_h"]).unwrap().to_json().unwrap(),
        serde_json::json!(3)
    );
    assert_eq!(
        value.lookup(&["#D"]).unwrap().to_json().unwrap(),
        serde_json::json!(4)
    );
    assert!(value.lookup(&["missing"]).is_none());
}

#[test]
fn export_keeps_defaults_constraints_and_optional_fields() {
    let value = eval("a: *\"x\" | string\nb: >=1 & <=10\nc?: int\nd: [...string]\ne: \"v\"\n");
    let Exported::Struct(fields) = value.export() else {
        panic!("not a struct")
    };
    let get = |label: &str| fields.iter().find(|f| f.label == label).unwrap().clone();
    match get("a").value {
        Exported::Default { default, others } => {
            assert_eq!(*default, Exported::Scalar(serde_json::json!("x")));
            assert_eq!(others.len(), 1);
            assert!(
                matches!(&others[0], Exported::Incomplete(c) if c.text == "string" && c.kinds == KindSet::STRING)
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(get("b").value, Exported::Incomplete(c) if c.text == ">=1 & <=10"));
    let c = get("c");
    assert!(c.optional);
    assert!(matches!(c.value, Exported::Incomplete(k) if k.text == "int"));
    assert!(
        matches!(get("d").value, Exported::List { ref elems, open: true, .. } if elems.is_empty())
    );
    assert_eq!(get("e").value, Exported::Scalar(serde_json::json!("v")));
}

/// KubeVela's patches apply `[...{...}]` to every element of the list they patch, so the
/// export a patch is read from keeps an open list's element constraint, evaluated in place.
#[test]
fn exported_open_lists_keep_their_element_constraint() {
    let source = "p: {on: true}\npatch: containers: [...{\n\tif p.on {lifecycle: \"x\"}\n}]\n";
    let parsed = cue::parse_file(cue::FileId(0), source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let mut parts =
        cue::Evaluator::new().evaluate_parts(&[&parsed.file], &[], &[("patch", cue::Take::Export)]);
    assert!(parts.errors().is_empty(), "{:?}", parts.errors());
    let (patch, _) = parts.take_export("patch").unwrap();
    let Exported::Struct(fields) = patch else {
        panic!("unexpected {patch:?}")
    };
    let Exported::List { elems, open, rest } = &fields[0].value else {
        panic!("unexpected {fields:?}")
    };
    assert!(elems.is_empty() && *open);
    let Some(Exported::Struct(constraint)) = rest.as_deref() else {
        panic!("no element constraint: {rest:?}")
    };
    assert_eq!(constraint[0].label, "lifecycle");
    assert_eq!(
        constraint[0].value,
        Exported::Scalar(serde_json::json!("x"))
    );
}

#[test]
fn validate_reports_errors_but_not_incompleteness() {
    let value = eval("a: int\nb: 1 & 2\n_h: \"x\" & \"y\"\n#D: {f: 1}\n#D: {f: 2}\n");
    let errors = value.validate();
    let paths: Vec<String> = errors.iter().map(|e| e.path_string()).collect();
    assert!(paths.contains(&"b".to_owned()), "{errors:?}");
    assert!(paths.contains(&"_h".to_owned()), "{errors:?}");
    assert!(paths.contains(&"#D.f".to_owned()), "{errors:?}");
    assert!(errors.iter().all(|e| e.kind == ErrorKind::Conflict));
    assert!(eval("a: int\nb: string\n").validate().is_empty());
}

#[test]
fn to_json_reports_every_error_with_path_and_position() {
    let source = "a: int\nb: 1\nb: 2\nc: {d: string}\n";
    let errors = eval(source).to_json().unwrap_err();
    let rendered: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.path_string(), e.message))
        .collect();
    assert_eq!(
        rendered,
        [
            "a: incomplete value int",
            "b: conflicting values 1 and 2",
            "c.d: incomplete value string"
        ]
    );
    let index = cue::LineIndex::new(source);
    let b = &errors[1];
    assert_eq!(b.kind, ErrorKind::Conflict);
    let lines: Vec<u32> = b
        .spans
        .iter()
        .map(|s| index.line_col(s.start).line)
        .collect();
    assert_eq!(lines, [2, 3]);
}

#[test]
fn injections_unify_into_top_level_fields() {
    let parsed = cue::parse_file(
        cue::FileId(0),
        "parameter: {image: string, port: *80 | int}\ncontext: {name: string}\noutput: {name: context.name, image: parameter.image, port: parameter.port}\n",
    );
    let parameter = serde_json::json!({"image": "nginx"});
    let context = serde_json::json!({"name": "web"});
    let span = cue::Span::default();
    let value = cue::Evaluator::new().evaluate(
        &[&parsed.file],
        &[
            cue::Injection {
                field: "parameter",
                value: &parameter,
                span,
            },
            cue::Injection {
                field: "context",
                value: &context,
                span,
            },
        ],
    );
    assert_eq!(
        value.lookup(&["output"]).unwrap().to_json().unwrap(),
        serde_json::json!({"name": "web", "image": "nginx", "port": 80})
    );
    let bad = serde_json::json!({"image": 3});
    let value = cue::Evaluator::new().evaluate(
        &[&parsed.file],
        &[cue::Injection {
            field: "parameter",
            value: &bad,
            span,
        }],
    );
    let errors = value.validate();
    assert_eq!(errors[0].path_string(), "parameter.image");
    assert_eq!(errors[0].kind, ErrorKind::Conflict);
}

/// `evaluate_omitting_injected` leaves out exactly the injected fields the program never
/// unified with; every other field, and validation, are those of `evaluate`.
#[test]
fn omitting_injected_keeps_declared_fields_and_errors() {
    let parsed = cue::parse_file(
        cue::FileId(0),
        "parameter: {image: string, port: *80 | int}\nout: {name: context.name, image: parameter.image, port: parameter.port}\n",
    );
    let context = serde_json::json!({"name": "web", "labels": {"a": "b"}});
    let span = cue::Span::default();
    let run = |parameter: &serde_json::Value, omit: bool| {
        let injections = [
            cue::Injection {
                field: "parameter",
                value: parameter,
                span,
            },
            cue::Injection {
                field: "context",
                value: &context,
                span,
            },
        ];
        let evaluator = cue::Evaluator::new();
        if omit {
            evaluator.evaluate_omitting_injected(&[&parsed.file], &injections)
        } else {
            evaluator.evaluate(&[&parsed.file], &injections)
        }
    };
    let good = serde_json::json!({"image": "nginx"});
    let full = run(&good, false);
    let omitted = run(&good, true);
    assert!(full.lookup(&["context"]).is_some());
    assert!(omitted.lookup(&["context"]).is_none());
    let labels = |value: &cue::Value| -> Vec<String> {
        value.fields().into_iter().map(|(label, _)| label).collect()
    };
    assert_eq!(labels(&full), ["parameter", "out", "context"]);
    assert_eq!(labels(&omitted), ["parameter", "out"]);
    assert_eq!(
        omitted.lookup(&["out"]).unwrap().to_json().unwrap(),
        serde_json::json!({"name": "web", "image": "nginx", "port": 80})
    );
    assert_eq!(
        omitted.lookup(&["parameter"]).unwrap().to_json().unwrap(),
        full.lookup(&["parameter"]).unwrap().to_json().unwrap()
    );
    let bad = serde_json::json!({"image": 3});
    let messages = |value: cue::Value| -> Vec<String> {
        value
            .validate()
            .iter()
            .map(|e| format!("{}: {}", e.path_string(), e.message))
            .collect()
    };
    let omitted_errors = messages(run(&bad, true));
    assert_eq!(omitted_errors, messages(run(&bad, false)));
    assert_eq!(omitted_errors.len(), 1);
    assert!(
        omitted_errors[0].starts_with("parameter.image: "),
        "{omitted_errors:?}"
    );
}

/// An injected field the program only reads is kept as data (not evaluated field by field); it
/// must read, export and validate exactly as when the program also declares it, which sends it
/// through the engine.
#[test]
fn injected_data_reads_like_evaluated_data() {
    let context = serde_json::json!({
        "name": "web",
        "n": 2.0,
        "big": 1.5,
        "output": {"spec": {"ports": [{"port": 80}, {"port": 443}], "labels": {"b": "x", "a": "y"}}}
    });
    let read_only = cue::parse_file(cue::FileId(0), "out: context.output.spec.ports[1].port\n");
    let declared = cue::parse_file(
        cue::FileId(0),
        "out: context.output.spec.ports[1].port\ncontext: {...}\n",
    );
    let span = cue::Span::new(cue::FileId(1), 0, 1);
    let evaluate = |file: &cue::ast::File| {
        cue::Evaluator::new().evaluate(
            &[file],
            &[cue::Injection {
                field: "context",
                value: &context,
                span,
            }],
        )
    };
    let data = evaluate(&read_only.file);
    let engine = evaluate(&declared.file);
    assert_eq!(data.to_json().unwrap(), engine.to_json().unwrap());
    assert_eq!(
        data.to_json().unwrap()["context"],
        serde_json::json!({
            "name": "web",
            "n": 2,
            "big": 1.5,
            "output": {"spec": {"ports": [{"port": 80}, {"port": 443}], "labels": {"b": "x", "a": "y"}}}
        })
    );
    assert_eq!(data.lookup(&["out"]).unwrap().to_json().unwrap(), 443);
    for path in [
        &["context", "output", "spec", "ports", "0"][..],
        &["context", "output", "spec", "labels"][..],
    ] {
        assert_eq!(
            data.lookup(path).unwrap().to_json().unwrap(),
            engine.lookup(path).unwrap().to_json().unwrap()
        );
        assert_eq!(
            data.lookup(path).unwrap().export(),
            engine.lookup(path).unwrap().export()
        );
    }
    let labels = |value: &cue::Value| -> Vec<String> {
        value
            .lookup(&["context", "output", "spec", "labels"])
            .unwrap()
            .fields()
            .into_iter()
            .map(|(label, _)| label)
            .collect()
    };
    assert_eq!(labels(&data), ["b", "a"]);
    assert_eq!(labels(&data), labels(&engine));
    assert!(data.validate().is_empty());

    // Data the engine rejects (a field name starting with `#` given as a string) still fails.
    let hashed = serde_json::json!({"#x": 1});
    let value = cue::Evaluator::new().evaluate(
        &[&read_only.file],
        &[cue::Injection {
            field: "context",
            value: &hashed,
            span,
        }],
    );
    assert_eq!(value.validate()[0].kind, ErrorKind::Unsupported);
}

#[test]
fn vela_imports_are_unsupported_at_the_use_site() {
    let source = "import \"vela/kube\"\n\napply: kube.#Apply & {value: {}}\nother: 1\n";
    let value = eval(source);
    let errors = value.to_json().unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, ErrorKind::Unsupported);
    assert_eq!(errors[0].message, "unsupported: import \"vela/kube\"");
    let at = cue::LineIndex::new(source).line_col(errors[0].span().unwrap().start);
    assert_eq!((at.line, at.column), (3, 8));
    assert_eq!(
        value.lookup(&["other"]).unwrap().to_json().unwrap(),
        serde_json::json!(1)
    );
}

#[test]
fn reference_cycles_and_deep_structures_do_not_overflow() {
    let value = eval(
        "a: b\nb: c\nc: a\nd: {e: d}\n#L: {next?: #L, v: int}\nl: #L & {v: 1, next: {v: 2}}\n",
    );
    let errors = value.to_json().unwrap_err();
    assert!(
        errors.iter().any(|e| e.message == "structural cycle"),
        "{errors:?}"
    );
    assert_eq!(
        value.lookup(&["l"]).unwrap().to_json().unwrap(),
        serde_json::json!({"v": 1, "next": {"v": 2}})
    );
}

#[test]
fn files_of_one_package_see_each_other() {
    let a = cue::parse_file(cue::FileId(0), "package p\n\nx: y + 1\n#S: {n: int}\n");
    let b = cue::parse_file(cue::FileId(1), "package p\n\ny: 41\ns: #S & {n: x}\n");
    let value = cue::Evaluator::new().evaluate(&[&a.file, &b.file], &[]);
    assert_eq!(
        value.to_json().unwrap(),
        serde_json::json!({"x": 42, "y": 41, "s": {"n": 42}})
    );
}

#[test]
fn long_reference_chains_stop_at_the_depth_limit_without_overflowing() {
    // Run on a thread with the default 2 MiB stack, like rayon workers.
    let handle = std::thread::spawn(|| {
        let mut source = String::new();
        for i in 0..2000 {
            source.push_str(&format!("a{i}: a{} + 1\n", i + 1));
        }
        source.push_str("a2000: 0\nnested: ");
        for _ in 0..60 {
            source.push_str("{x: ");
        }
        source.push('1');
        for _ in 0..60 {
            source.push('}');
        }
        source.push('\n');
        let value = eval(&source);
        let errors = value.to_json().unwrap_err();
        assert!(
            errors.iter().any(|e| e.kind == ErrorKind::Cycle),
            "{:?}",
            &errors[..1]
        );
        assert_eq!(
            value.lookup(&["a1999"]).unwrap().to_json().unwrap(),
            serde_json::json!(1)
        );
        // Deep but finite data is not a structural cycle.
        let mut nested = value.lookup(&["nested"]).unwrap();
        for _ in 0..59 {
            nested = nested.lookup(&["x"]).unwrap();
        }
        assert_eq!(nested.to_json().unwrap(), serde_json::json!({"x": 1}));
    });
    handle.join().unwrap();
}

#[test]
fn huge_repetitions_are_errors_not_allocations() {
    let value = eval(
        "import \"strings\"\n\na: \"x\" * 1000000000000\nb: strings.Repeat(\"y\", 1000000000000)\n",
    );
    let errors = value.to_json().unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
}

/// KubeVela reads `outputs` with the Go API's `Fields()`: a comprehension over an absent
/// optional parameter adds nothing and does not hide the other fields, while a full export
/// still fails as `cue export` does.
#[test]
fn incomplete_comprehension_keeps_the_other_fields() {
    let value = eval(
        "parameter: {\n\tpvc?: [...{name: string}]\n\tconfigMap?: [...{name: string}]\n}\nparameter: pvc: [{name: \"a\"}]\noutputs: {\n\tfor v in parameter.pvc {\"pvc-\\(v.name)\": kind: \"PersistentVolumeClaim\"}\n\tfor v in parameter.configMap {\"cm-\\(v.name)\": kind: \"ConfigMap\"}\n}\n",
    );
    let outputs = value.lookup(&["outputs"]).unwrap();
    let fields = outputs.fields();
    let labels: Vec<&str> = fields.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels, vec!["pvc-a"]);
    assert_eq!(
        fields[0].1.to_json().unwrap(),
        serde_json::json!({"kind": "PersistentVolumeClaim"})
    );
    let errors = outputs.to_json().unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, ErrorKind::Incomplete);
    assert_eq!(
        errors[0].message,
        "cannot reference optional field: configMap"
    );
}

/// KubeVela upgrades templates written for CUE before v0.11: list arithmetic is accepted only
/// when asked for, and rejected as `cue export` does otherwise.
#[test]
fn legacy_list_arithmetic_is_opt_in() {
    let source =
        "base: [{name: \"a\"}]\nextra: [{name: \"b\"}]\nall: base + extra\ntwice: 2 * [1]\n";
    let parsed = cue::parse_file(cue::FileId(0), source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let legacy = cue::Evaluator::new()
        .with_legacy_list_arithmetic(true)
        .evaluate(&[&parsed.file], &[]);
    assert_eq!(
        legacy.to_json().unwrap(),
        serde_json::json!({
            "base": [{"name": "a"}],
            "extra": [{"name": "b"}],
            "all": [{"name": "a"}, {"name": "b"}],
            "twice": [1, 1],
        })
    );
    let strict = cue::Evaluator::new().evaluate(&[&parsed.file], &[]);
    let errors = strict.to_json().unwrap_err();
    assert!(
        errors.iter().any(|e| e
            .message
            .starts_with("Addition of lists is superseded by list.Concat")),
        "{errors:?}"
    );
}

/// An untouched optional field whose value depends on the template alone is built once and
/// reused by later evaluations of the same file (`engine/pure.rs`); one that can see the
/// injected data, directly, through a definition, or through an enclosing field, must still be
/// evaluated every time.
#[test]
fn optional_fields_are_reused_only_when_the_data_cannot_reach_them() {
    let parsed = cue::parse_file(
        cue::FileId(0),
        "#P: {v: context.n}\n#Q: {w: *7 | int, x?: {y: int}}\nparameter: {\n\tk: int\n\ta?: {x: int, y: *\"d\" | string}\n\tb?: {y: context.n}\n\tc?: #P\n\td?: #Q\n\te?: {f: {g: context.n + 1}}\n\th?: {i: k}\n}\n",
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    fn field<'e>(value: &'e Exported, path: &[&str]) -> &'e Exported {
        path.iter().fold(value, |value, label| match value {
            Exported::Struct(fields) => {
                &fields
                    .iter()
                    .find(|f| f.label == *label)
                    .unwrap_or_else(|| panic!("no field {label}"))
                    .value
            }
            other => panic!("not a struct at {label}: {other:?}"),
        })
    }
    let mut first_schema = None;
    // The same thread evaluates the file three times: the later ones reuse the first's
    // data-independent fields.
    for n in [1, 2, 3] {
        let context = serde_json::json!({"n": n});
        let parameter = serde_json::json!({"k": n * 10});
        let span = cue::Span::default();
        let value = cue::Evaluator::new().evaluate(
            &[&parsed.file],
            &[
                cue::Injection {
                    field: "parameter",
                    value: &parameter,
                    span,
                },
                cue::Injection {
                    field: "context",
                    value: &context,
                    span,
                },
            ],
        );
        assert!(value.validate().is_empty(), "{:?}", value.validate());
        let exported = value.lookup(&["parameter"]).unwrap().export();
        let n_json = serde_json::json!(n);
        assert_eq!(
            field(&exported, &["b", "y"]),
            &Exported::Scalar(n_json.clone())
        );
        assert_eq!(field(&exported, &["c", "v"]), &Exported::Scalar(n_json));
        assert_eq!(
            field(&exported, &["e", "f", "g"]),
            &Exported::Scalar(serde_json::json!(n + 1))
        );
        assert_eq!(
            field(&exported, &["h", "i"]),
            &Exported::Scalar(serde_json::json!(n * 10))
        );
        let schema = (
            field(&exported, &["a"]).clone(),
            field(&exported, &["d"]).clone(),
        );
        assert!(matches!(
            field(&exported, &["a", "x"]),
            Exported::Incomplete(_)
        ));
        assert!(matches!(
            field(&exported, &["d", "w"]),
            Exported::Default { .. }
        ));
        match &first_schema {
            None => first_schema = Some(schema),
            Some(first) => assert_eq!(first, &schema),
        }
    }
}

/// Identifier resolution remembers where a name is declared per file (by the addresses of its
/// declarations): a new file parsed into the memory of a dropped one, with the same names in
/// another order, must still resolve to its own declarations.
#[test]
fn resolution_of_a_new_file_at_a_dropped_files_addresses_is_its_own() {
    for round in 0..20 {
        let (source, expected) = if round % 2 == 0 {
            ("a: 1\nb: 2\nout: a\n", 1)
        } else {
            ("b: 3\na: 4\nout: a\n", 4)
        };
        let parsed = cue::parse_file(cue::FileId(0), source);
        let value = cue::Evaluator::new().evaluate(&[&parsed.file], &[]);
        assert_eq!(
            value.lookup(&["out"]).unwrap().to_json().unwrap(),
            expected,
            "round {round}"
        );
    }
}

/// Identifier resolution remembers, per file and thread, which scope answered each name (see
/// `Hops` in engine.rs). Evaluating one file again and again with other data, and with an
/// injected field present or missing, must give what a fresh walk of the scopes gives: inner
/// declarations shadowing outer ones, `let`, comprehension bindings, value aliases and
/// definitions re-evaluated per reference, and an injected root field looked up per evaluation.
/// (Expected values from `cue export` v0.14.1 with the data written into the file.)
#[test]
fn remembered_resolutions_follow_each_evaluations_data() {
    let source = "parameter: {items: [string]: int, n: int}\nx: 10\nout: {\n\ta: x\n\tlet y = x + 1\n\tb: y\n\tc: [for k, v in parameter.items {\"\\(k)=\\(v)\"}]\n\td: (#Base & {n: parameter.n}).m\n\te: S={k: 1, l: S.k + x}\n\tx: 20\n}\n#Base: {n: int, m: n + 1}\nnamed: context.name\n";
    let parsed = cue::parse_file(cue::FileId(0), source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let span = cue::Span::default();
    let context = serde_json::json!({"name": "web"});
    for round in 0..6 {
        let (parameter, expected) = if round % 2 == 0 {
            (
                serde_json::json!({"items": {"p": 1, "q": 2}, "n": 3}),
                serde_json::json!({"a": 20, "b": 21, "c": ["p=1", "q=2"], "d": 4, "e": {"k": 1, "l": 21}, "x": 20}),
            )
        } else {
            (
                serde_json::json!({"items": {"r": 5}, "n": 7}),
                serde_json::json!({"a": 20, "b": 21, "c": ["r=5"], "d": 8, "e": {"k": 1, "l": 21}, "x": 20}),
            )
        };
        let mut injections = vec![cue::Injection {
            field: "parameter",
            value: &parameter,
            span,
        }];
        // `context` is injected in every third round only.
        if round % 3 == 0 {
            injections.push(cue::Injection {
                field: "context",
                value: &context,
                span,
            });
        }
        let value = cue::Evaluator::new().evaluate(&[&parsed.file], &injections);
        assert_eq!(
            value.lookup(&["out"]).unwrap().to_json().unwrap(),
            expected,
            "round {round}"
        );
        let named = value.lookup(&["named"]).unwrap().to_json();
        if round % 3 == 0 {
            assert_eq!(named.unwrap(), serde_json::json!("web"), "round {round}");
        } else {
            let errors = named.unwrap_err();
            assert_eq!(errors[0].kind, ErrorKind::Reference, "round {round}");
            assert!(
                errors[0].message.contains("\"context\""),
                "{}",
                errors[0].message
            );
        }
    }
}
