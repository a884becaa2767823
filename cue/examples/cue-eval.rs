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
    let repeat: u32 = std::env::var("CUE_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    if repeat > 0 {
        let (mut eval, mut json, mut drop) = (
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
        );
        for _ in 0..repeat {
            let t0 = std::time::Instant::now();
            let value = cue::Evaluator::new().evaluate(&[&parsed.file], &[]);
            let t1 = std::time::Instant::now();
            let out = value.to_json();
            let t2 = std::time::Instant::now();
            std::mem::drop((value, out));
            let t3 = std::time::Instant::now();
            eval += t1 - t0;
            json += t2 - t1;
            drop += t3 - t2;
        }
        eprintln!(
            "per evaluation: evaluate {:?} to_json {:?} drop {:?}",
            eval / repeat,
            json / repeat,
            drop / repeat
        );
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
