//! Diagnostics for people: drawn like compiler errors with `annotate-snippets` (rule id,
//! severity, message, the source line with the span underlined, `file:line:col`).
//!
//! Spans inside a CUE template embedded in a YAML definition point into the template text;
//! the source map knows where that text sits in its YAML file (first line and stripped
//! indentation), so the snippet is re-indented and numbered to show the YAML file's real lines
//! and columns.

use annotate_snippets::renderer::DecorStyle;
use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use cue::{FileId, Span};

use analyzer::{Diagnostic, Severity, SourceMap};

/// How diagnostics are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticStyle {
    /// No colours: for files, pipes and golden tests.
    Plain,
    /// ANSI colours, for a terminal.
    Color,
}

/// Draws every diagnostic, in the order given, separated by blank lines. Empty when there are
/// none.
pub fn render_diagnostics<'d>(
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    sources: &SourceMap,
    style: DiagnosticStyle,
) -> String {
    let renderer = match style {
        DiagnosticStyle::Plain => Renderer::plain(),
        DiagnosticStyle::Color => Renderer::styled(),
    }
    .decor_style(DecorStyle::Ascii);
    let mut out = String::new();
    for diagnostic in diagnostics {
        out.push_str(&render_one(diagnostic, sources, &renderer));
        out.push_str("\n\n");
    }
    out
}

/// `file:line:col`, or `-` when the diagnostic has no position.
pub fn location_string(diagnostic: &Diagnostic, sources: &SourceMap) -> String {
    match diagnostic.span {
        Some(span) => {
            let location = sources.locate(span);
            format!("{}:{}:{}", location.path, location.line, location.column)
        }
        None => "-".to_owned(),
    }
}

/// A source text as shown in a snippet: the file's real lines, so line numbers and columns
/// match the file on disk.
struct ShownSource {
    path: String,
    text: String,
    first_line: usize,
    /// Columns of indentation added back to each line of an embedded text.
    indent: usize,
}

impl ShownSource {
    fn new(sources: &SourceMap, file: FileId) -> ShownSource {
        // Offset 0 of a plain file is line 1, column 1; for an embedded template it is where
        // the template starts in its YAML file, which gives the first line and indentation.
        let start = sources.locate(Span::new(file, 0, 0));
        let indent = start.column.saturating_sub(1) as usize;
        let raw = sources.text(file);
        let text = if indent == 0 {
            raw.to_owned()
        } else {
            let padding = " ".repeat(indent);
            raw.split_inclusive('\n')
                .map(|line| format!("{padding}{line}"))
                .collect()
        };
        ShownSource {
            path: start.path,
            text,
            first_line: start.line.max(1) as usize,
            indent,
        }
    }

    /// The byte range in the shown text of a byte range in the raw text.
    fn range(&self, raw: &str, span: Span) -> std::ops::Range<usize> {
        let start = floor_char_boundary(raw, span.start as usize);
        let end = floor_char_boundary(raw, (span.end as usize).max(start));
        let shift = |offset: usize| {
            let lines_before = raw[..offset].matches('\n').count();
            offset + self.indent * (lines_before + 1)
        };
        if self.indent == 0 {
            start..end
        } else {
            shift(start)..shift(end)
        }
    }
}

fn render_one(diagnostic: &Diagnostic, sources: &SourceMap, renderer: &Renderer) -> String {
    let level = match diagnostic.severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let title = level
        .primary_title(diagnostic.message.as_str())
        .id(diagnostic.rule);

    // One snippet per file, the primary span's file first; labels in other files get theirs.
    let mut files: Vec<FileId> = Vec::new();
    if let Some(span) = diagnostic.span {
        files.push(span.file);
    }
    for label in &diagnostic.labels {
        if !files.contains(&label.span.file) {
            files.push(label.span.file);
        }
    }
    let shown: Vec<(FileId, ShownSource)> = files
        .iter()
        .map(|&file| (file, ShownSource::new(sources, file)))
        .collect();

    let mut snippets = Vec::new();
    for (file, source) in &shown {
        let raw = sources.text(*file);
        let mut snippet = Snippet::source(source.text.as_str())
            .path(source.path.as_str())
            .line_start(source.first_line);
        if let Some(span) = diagnostic.span.filter(|span| span.file == *file) {
            snippet = snippet.annotation(AnnotationKind::Primary.span(source.range(raw, span)));
        }
        for label in diagnostic
            .labels
            .iter()
            .filter(|label| label.span.file == *file)
        {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(source.range(raw, label.span))
                    .label(label.message.as_str()),
            );
        }
        snippets.push(snippet);
    }

    let mut notes = Vec::new();
    if diagnostic.span.is_none() && diagnostic.labels.is_empty() {
        notes.push("no source position".to_owned());
    }
    match (&diagnostic.app, &diagnostic.component) {
        (Some(app), Some(component)) => notes.push(format!("in app {app}, component {component}")),
        (Some(app), None) => notes.push(format!("in app {app}")),
        (None, Some(component)) => notes.push(format!("in component {component}")),
        (None, None) => {}
    }

    let mut group: Group<'_> = title.elements(snippets);
    for note in &notes {
        group = group.element(Level::NOTE.message(note.as_str()));
    }
    renderer.render(&[group])
}

/// The largest char boundary at or below `offset`, clamped to the text: spans from other
/// crates are trusted for meaning, not for slicing.
fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer::{AppRef, Embedding};
    use expect_test::expect;

    #[test]
    fn draws_the_span_with_file_line_and_column() {
        let mut sources = SourceMap::new();
        let text = "kind: Application\nspec:\n  components:\n  - name: web\n    type: webservise\n";
        let file = sources.add("apps/web.yaml", text);
        let start = text.find("webservise").unwrap() as u32;
        let diagnostic = Diagnostic::error(
            "unknown-component-type",
            "unknown component type `webservise`",
            Some(Span::new(file, start, start + 10)),
        )
        .for_app(&AppRef {
            namespace: "team-a".into(),
            name: "web".into(),
        })
        .for_component("web");
        let out = render_diagnostics([&diagnostic], &sources, DiagnosticStyle::Plain);
        expect![[r#"
            error[unknown-component-type]: unknown component type `webservise`
             --> apps/web.yaml:5:11
              |
            5 |     type: webservise
              |           ^^^^^^^^^^
              |
              = note: in app team-a/web, component web

        "#]]
        .assert_eq(&out);
        assert_eq!(location_string(&diagnostic, &sources), "apps/web.yaml:5:11");
    }

    #[test]
    fn embedded_templates_show_their_yaml_lines() {
        let mut sources = SourceMap::new();
        let yaml = "spec:\n  schematic:\n    cue:\n      template: |\n        output: {\n          a: 1 +\n        }\n";
        let parent = sources.add("definitions/x.yaml", yaml);
        let template = "output: {\n  a: 1 +\n}\n";
        let file = sources.add_embedded(
            template,
            Embedding {
                parent,
                first_line: 5,
                indent: 8,
            },
        );
        let start = template.find("1 +").unwrap() as u32;
        let diagnostic = Diagnostic::error(
            "cue-syntax",
            "expected operand",
            Some(Span::new(file, start, start + 3)),
        );
        let out = render_diagnostics([&diagnostic], &sources, DiagnosticStyle::Plain);
        expect![[r#"
            error[cue-syntax]: expected operand
             --> definitions/x.yaml:6:14
              |
            6 |           a: 1 +
              |              ^^^

        "#]]
        .assert_eq(&out);
    }

    #[test]
    fn a_diagnostic_without_position_still_renders() {
        let sources = SourceMap::new();
        let diagnostic = Diagnostic::warning("internal", "something odd", None);
        let out = render_diagnostics([&diagnostic], &sources, DiagnosticStyle::Plain);
        assert!(out.starts_with("warning[internal]: something odd"), "{out}");
        assert!(out.contains("no source position"), "{out}");
    }
}
