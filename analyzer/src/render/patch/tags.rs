//! Patch comment tags: `// +patchKey=name` and `// +patchStrategy=retainKeys` on a field's doc
//! comment, read like KubeVela's `findCommentTag` (`wf:pkg/cue/model/sets/utils.go`): every
//! comment line, trimmed, must start with `+`; it splits at the first `=`; key and value are
//! trimmed; a value containing whitespace is ignored; a later line wins.

/// The patch strategy a field asks for. Unknown values (KubeVela's `command` trait writes
/// `+patchStrategy=open`) have no effect, like upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchStrategy {
    /// CUE unification, with keyed lists.
    Unify,
    /// Replace the base value: a struct wholesale, a keyed list element wholesale.
    RetainKeys,
    /// A list becomes exactly the patch's list.
    Replace,
    /// RFC 6902 JSON patch (only on the `patch` field itself).
    JsonPatch,
    /// RFC 7396 JSON merge patch (only on the `patch` field itself).
    JsonMergePatch,
}

/// The tags of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldTags {
    pub(crate) patch_key: Option<String>,
    pub(crate) strategy: PatchStrategy,
}

impl FieldTags {
    /// Reads the tags from a field's doc comment lines (`//` already stripped or not).
    pub(crate) fn parse(doc: &[String]) -> FieldTags {
        // Most patch fields have no doc comment: no line iterator to set up for them.
        if doc.is_empty() {
            return FieldTags {
                patch_key: None,
                strategy: PatchStrategy::Unify,
            };
        }
        let mut patch_key = None;
        let mut strategy = None;
        for line in doc.iter().flat_map(|entry| entry.lines()) {
            let line = line.trim();
            let line = line.strip_prefix("//").unwrap_or(line).trim();
            let Some(tag) = line.strip_prefix('+') else {
                continue;
            };
            let Some((key, value)) = tag.split_once('=') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if value.is_empty() || value.contains(char::is_whitespace) {
                continue;
            }
            match key {
                "patchKey" => patch_key = Some(value.to_owned()),
                "patchStrategy" => strategy = Some(value.to_owned()),
                _ => {}
            }
        }
        let strategy = match strategy.as_deref() {
            Some("retainKeys") => PatchStrategy::RetainKeys,
            Some("replace") => PatchStrategy::Replace,
            Some("jsonPatch") => PatchStrategy::JsonPatch,
            Some("jsonMergePatch") => PatchStrategy::JsonMergePatch,
            _ => PatchStrategy::Unify,
        };
        FieldTags {
            patch_key,
            strategy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> FieldTags {
        FieldTags::parse(
            &lines
                .iter()
                .map(|line| (*line).to_owned())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn reads_key_and_strategy() {
        let tags = parse(&["+patchKey=name", " +patchStrategy = retainKeys "]);
        assert_eq!(tags.patch_key.as_deref(), Some("name"));
        assert_eq!(tags.strategy, PatchStrategy::RetainKeys);
    }

    #[test]
    fn later_lines_win_and_whitespace_values_are_ignored() {
        let tags = parse(&[
            "+patchKey=name",
            "+patchKey=containerName",
            "+patchStrategy=a b",
        ]);
        assert_eq!(tags.patch_key.as_deref(), Some("containerName"));
        assert_eq!(tags.strategy, PatchStrategy::Unify);
    }

    #[test]
    fn unknown_strategies_and_plain_comments_have_no_effect() {
        let tags = parse(&["// +patchStrategy=open", "patchKey=name", "just a comment"]);
        assert_eq!(
            tags,
            FieldTags {
                patch_key: None,
                strategy: PatchStrategy::Unify
            }
        );
        assert_eq!(
            parse(&["// +patchStrategy=jsonMergePatch"]).strategy,
            PatchStrategy::JsonMergePatch
        );
    }
}
