//! Debugging aid: evaluates one CUE file and prints `cue export`-like JSON, or the errors.
//! Usage: `cargo run -p cue --example cue-eval -- FILE`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: cue-eval FILE");
        std::process::exit(2);
    };
    let source = match std::fs::read_to_string(&path) {
        Ok(source) => source,
        Err(error) => {
            eprintln!("{path}: {error}");
            std::process::exit(2);
        }
    };
    let parsed = cue::parse_file(cue::FileId(0), &source);
    let index = cue::LineIndex::new(&source);
    let print = |errors: &[cue::Error]| {
        for error in errors {
            let at = error.span().map(|s| index.line_col(s.start));
            let at = at.map_or(String::new(), |lc| {
                format!(" ({path}:{}:{})", lc.line, lc.column)
            });
            eprintln!("{}: {}{at}", error.path_string(), error.message);
        }
    };
    if !parsed.errors.is_empty() {
        print(&parsed.errors);
        std::process::exit(1);
    }
    let value = cue::Evaluator::new().evaluate(&[&parsed.file], &[]);
    match value.to_json() {
        Ok(json) => println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        ),
        Err(errors) => {
            print(&errors);
            std::process::exit(1);
        }
    }
}
