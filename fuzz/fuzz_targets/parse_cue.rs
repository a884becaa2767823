//! Fuzz target: the CUE parser must never panic, hang or overflow the stack, whatever the input,
//! and every error it reports must carry a span inside the input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The parser takes text; invalid UTF-8 is rejected before parsing by every caller.
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = cue::parse_file(cue::FileId(0), source);
    for error in &parsed.errors {
        for span in &error.spans {
            assert!(span.start <= span.end, "inverted span {span:?} for {error}");
            assert!(
                span.end as usize <= source.len(),
                "span {span:?} past the end for {error}"
            );
            assert!(
                source.is_char_boundary(span.start as usize)
                    && source.is_char_boundary(span.end as usize),
                "span {span:?} splits a character for {error}"
            );
        }
    }
});
