//! Fuzz target: the YAML loader and everything after it (Application model, rendering, every
//! analysis rule, OpenAPI validation, CRD schemas) must never panic, hang or overflow the
//! stack on any file of a repository, and every diagnostic's spans must lie inside the text
//! of the file they name.
//!
//! The input is one file at `apps/fuzz.yaml`; it is analysed with the built-in definitions,
//! so a well-formed Application renders through the real templates.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn builtins() -> &'static analyzer::Definitions {
    static BUILTINS: OnceLock<analyzer::Definitions> = OnceLock::new();
    BUILTINS.get_or_init(analyzer::Definitions::builtin)
}

fuzz_target!(|data: &[u8]| {
    // Snapshots carry text; the agent reports a non-UTF-8 file before loading.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let snapshot = analyzer::Snapshot {
        commit: None,
        files: vec![analyzer::SourceFile {
            path: "apps/fuzz.yaml".to_owned(),
            contents: text.to_owned(),
        }],
    };
    let (output, sources) =
        analyzer::analyze_snapshot(&snapshot, builtins(), &analyzer::AnalysisOptions::default());
    let diagnostics = output
        .diagnostics
        .iter()
        .chain(output.apps.iter().flat_map(|app| &app.diagnostics));
    for diagnostic in diagnostics {
        assert_ne!(
            diagnostic.rule, "internal-error",
            "the renderer panicked: {}",
            diagnostic.message
        );
        let spans = diagnostic
            .span
            .into_iter()
            .chain(diagnostic.labels.iter().map(|label| label.span));
        for span in spans {
            let file_text = sources.text(span.file);
            assert!(
                span.start <= span.end,
                "inverted span {span:?}: {diagnostic:?}"
            );
            assert!(
                span.end as usize <= file_text.len(),
                "span {span:?} past the end: {diagnostic:?}"
            );
            assert!(
                file_text.is_char_boundary(span.start as usize)
                    && file_text.is_char_boundary(span.end as usize),
                "span {span:?} splits a character: {diagnostic:?}"
            );
            // Locating a span (line and column) must work for every span.
            let _ = sources.locate(span);
        }
    }
});
