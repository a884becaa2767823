//! Evaluation budgets: a template that asks for unbounded work ends in one `Budget` error, on
//! both evaluation paths, and ordinary templates are untouched by the default budget.

use std::time::{Duration, Instant};

use cue::{Budget, Deadline, ErrorKind, Evaluator, Take};

/// Two nested comprehensions over 3,000 items: nine million fields.
const NESTED_RANGES: &str = r#"
import "list"

output: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	data: {
		for i in list.Range(0, 3000, 1) {
			for j in list.Range(0, 3000, 1) {
				"k-\(i)-\(j)": "\(i * j)"
			}
		}
	}
}
"#;

fn parse(source: &str) -> cue::ast::File {
    let parsed = cue::parse_file(cue::FileId(0), source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.file
}

fn small(steps: u64) -> Evaluator {
    Evaluator::new().with_budget(Budget {
        steps,
        deadline: None,
    })
}

#[test]
fn nested_ranges_stop_at_the_step_budget() {
    let file = parse(NESTED_RANGES);
    let parts = small(100_000).evaluate_parts(&[&file], &[], &[("output", Take::Export)]);
    let errors = parts.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, ErrorKind::Budget);
    assert_eq!(
        errors[0].message,
        "evaluation stopped: it exceeded its budget of 100000 steps"
    );
    // Nothing of the half-made value is handed out.
    let mut parts = parts;
    assert!(parts.take_export("output").is_none());
}

#[test]
fn nested_ranges_stop_at_the_default_budget_on_the_value_path() {
    let file = parse(NESTED_RANGES);
    let value = Evaluator::new().evaluate(&[&file], &[]);
    assert!(value.is_bottom());
    let errors = value.validate();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, ErrorKind::Budget);
    assert!(
        errors[0]
            .message
            .contains(&Budget::DEFAULT_STEPS.to_string()),
        "{}",
        errors[0].message
    );
}

#[test]
fn a_passed_deadline_stops_the_evaluation() {
    let file = parse(NESTED_RANGES);
    let evaluator = Evaluator::new().with_budget(Budget {
        steps: u64::MAX,
        deadline: Some(Deadline {
            at: Instant::now(),
            limit: Duration::from_millis(5),
        }),
    });
    let parts = evaluator.evaluate_parts(&[&file], &[], &[("output", Take::Export)]);
    let errors = parts.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, ErrorKind::Deadline);
    assert_eq!(
        errors[0].message,
        "evaluation stopped: it ran past its deadline of 5ms"
    );
}

#[test]
fn doubling_strings_count_their_bytes() {
    // Each field doubles the last: 2^24 bytes by `s24`, without one vertex per byte.
    let mut source =
        String::from("s0: \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"\n");
    for i in 1..=24 {
        source.push_str(&format!("s{i}: s{} + s{}\n", i - 1, i - 1));
    }
    let file = parse(&source);
    let errors = small(50_000).evaluate(&[&file], &[]).validate();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].kind, ErrorKind::Budget);
}

#[test]
fn ordinary_templates_fit_a_small_budget() {
    // A comprehension of modest size: well within even a tight budget.
    let file = parse(
        r#"
import "list"

parameter: {replicas: *3 | int, ports: [...int] | *[80, 443]}
output: {
	spec: replicas: parameter.replicas
	spec: ports: [for i, p in parameter.ports {name: "p\(i)", port: p}]
	spec: ids: [for i in list.Range(0, 50, 1) {"id-\(i)"}]
}
"#,
    );
    let value = small(5_000).evaluate(&[&file], &[]);
    let json = value.to_json().expect("fits the budget");
    assert_eq!(json["output"]["spec"]["ports"][1]["port"], 443);
    assert_eq!(json["output"]["spec"]["ids"][49], "id-49");
    // The deadline is far away: the same result.
    let later =
        Evaluator::new().with_budget(Budget::default().with_time_limit(Duration::from_secs(600)));
    assert_eq!(later.evaluate(&[&file], &[]).to_json().ok(), Some(json));
}

#[test]
fn every_copy_of_a_string_counts() {
    // A 1 MB string costs 15,625 steps to build; each copy of it into an output, a joined string
    // or a marshalled text costs as much again, so copies cannot outgrow the budget.
    let string = "s: strings.Repeat(\"a\", 1000000)";
    for (what, imports, copies) in [
        (
            "exported",
            "\"list\"",
            "x: [for i in list.Range(0, 10, 1) {s}]",
        ),
        (
            "joined",
            "\"list\"",
            "x: len(strings.Join(list.Repeat([s], 10), \"\"))",
        ),
        (
            "marshalled",
            "\"encoding/json\", \"list\"",
            "x: len(json.Marshal(list.Repeat([s], 10)))",
        ),
    ] {
        let file = parse(&format!(
            "import ({imports}, \"strings\")\n{string}\n{copies}\n"
        ));
        let errors = small(100_000).evaluate(&[&file], &[]).validate();
        assert_eq!(errors.len(), 1, "{what}: {errors:?}");
        assert_eq!(errors[0].kind, ErrorKind::Budget, "{what}: {errors:?}");
        let parts = small(100_000).evaluate_parts(&[&file], &[], &[("x", Take::Export)]);
        let errors = parts.errors();
        assert_eq!(errors.len(), 1, "{what}: {errors:?}");
        assert_eq!(errors[0].kind, ErrorKind::Budget, "{what}: {errors:?}");
    }
    // One copy is within the budget.
    let file = parse(&format!("import \"strings\"\n{string}\nx: s\n"));
    let json = small(100_000)
        .evaluate(&[&file], &[])
        .to_json()
        .expect("one copy fits");
    assert_eq!(json["x"].as_str().map(str::len), Some(1_000_000));
}
