//! Evaluates the given CUE files N times in one process with this crate, for
//! `hack/cue-compare.sh`, which puts it next to Go CUE doing the same: exported to JSON, or with
//! `--validate` only checked for errors (non-concrete values allowed). Prints one JSON line:
//! `{"ok", "per_eval_ms", "error"}`.
//!
//! ```sh
//! cargo run --release -p cue --example cue_bench -- [--validate] -n 10 FILE.cue...
//! ```

use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let validate = args.first().map(String::as_str) == Some("--validate");
    if validate {
        args.remove(0);
    }
    let mut n_evaluations = 10usize;
    if args.first().map(String::as_str) == Some("-n") && args.len() >= 2 {
        n_evaluations = args[1].parse().unwrap_or(10).max(1);
        args.drain(..2);
    }
    let texts: Vec<String> = args
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap_or_default())
        .collect();
    let mut error = None;
    let start = Instant::now();
    for _ in 0..n_evaluations {
        // Parsed afresh each time, as `cue export` parses its files.
        let parsed: Vec<cue::Parsed> = texts
            .iter()
            .enumerate()
            .map(|(index, text)| cue::parse_file(cue::FileId(index as u32), text))
            .collect();
        if let Some(syntax) = parsed.iter().flat_map(|p| &p.errors).next() {
            error = Some(syntax.message.clone());
            break;
        }
        let files: Vec<&cue::ast::File> = parsed.iter().map(|p| &p.file).collect();
        let value = cue::Evaluator::new().evaluate(&files, &[]);
        let errors = if validate {
            value.validate()
        } else {
            value.to_json().err().unwrap_or_default()
        };
        if let Some(first) = errors.first() {
            error = Some(first.message.clone());
            break;
        }
    }
    let per_eval_ms = start.elapsed().as_secs_f64() * 1000.0 / n_evaluations as f64;
    println!(
        "{}",
        serde_json::json!({"ok": error.is_none(), "per_eval_ms": per_eval_ms, "error": error})
    );
}
