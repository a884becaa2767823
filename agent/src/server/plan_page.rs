//! The read-only HTML plan page per commit that commit statuses link to, and the bounded store
//! of pages. Every piece of text is HTML-escaped: app names, messages and diffs come from the
//! user's repository and the cluster.

use std::sync::{Arc, RwLock};

use indexmap::IndexMap;

use crate::forge::StatusState;
use crate::source::git::CommitId;

/// What a page shows for one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanPage {
    pub source: String,
    pub commit: CommitId,
    /// `deploy of main`, `preview of pull request #3`, `drift check`.
    pub title: String,
    /// One row per app, sorted by app.
    pub apps: Vec<PageApp>,
    /// The plan as text (diffs included), shown preformatted.
    pub body: String,
}

/// One app's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageApp {
    /// `namespace/name`.
    pub app: String,
    pub state: StatusState,
    pub description: String,
}

/// The last [`PlanStore::CAPACITY`] pages, by commit. Cheap to clone; shared between the loop
/// (writer) and the server (reader).
#[derive(Debug, Clone, Default)]
pub struct PlanStore {
    pages: Arc<RwLock<IndexMap<String, PlanPage>>>,
}

impl PlanStore {
    /// Pages kept; the oldest is dropped first. Memory stays bounded however long the agent runs.
    pub const CAPACITY: usize = 256;
    /// Bytes of page text kept (rows and body): a first deploy of 10,000 apps writes a body of
    /// megabytes, and 256 of those would be most of the agent's memory. The newest page is
    /// always kept.
    pub const MAX_BYTES: usize = 32 << 20;

    /// Stores (or replaces) the page of `page.commit`.
    pub fn insert(&self, page: PlanPage) {
        let mut pages = match self.pages.write() {
            Ok(pages) => pages,
            // A panic while holding the lock left plain data behind; it is still usable.
            Err(poisoned) => poisoned.into_inner(),
        };
        let key = page.commit.to_string();
        pages.shift_remove(&key);
        pages.insert(key, page);
        let mut bytes: usize = pages.values().map(page_bytes).sum();
        while pages.len() > 1 && (pages.len() > Self::CAPACITY || bytes > Self::MAX_BYTES) {
            if let Some((_, oldest)) = pages.shift_remove_index(0) {
                bytes = bytes.saturating_sub(page_bytes(&oldest));
            }
        }
    }

    /// The page of a commit.
    pub fn get(&self, commit: &str) -> Option<PlanPage> {
        let pages = match self.pages.read() {
            Ok(pages) => pages,
            Err(poisoned) => poisoned.into_inner(),
        };
        pages.get(&commit.to_ascii_lowercase()).cloned()
    }
}

/// Roughly the heap a page holds.
fn page_bytes(page: &PlanPage) -> usize {
    page.body.len()
        + page
            .apps
            .iter()
            .map(|app| app.app.len() + app.description.len() + 16)
            .sum::<usize>()
}

/// The page as a complete HTML document.
pub fn render_html(page: &PlanPage) -> String {
    let mut html = String::new();
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    html.push_str(&format!(
        "<title>driftless: {} @ {}</title>",
        escape(&page.title),
        escape(page.commit.short())
    ));
    html.push_str(
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.2em .8em;text-align:left}\
         .success{color:#1a7f37}.failure,.error{color:#cf222e}.pending{color:#9a6700}\
         pre{background:#f6f8fa;padding:1em;overflow:auto}</style></head><body>\n",
    );
    html.push_str(&format!(
        "<h1>{}</h1>\n<p>Source <code>{}</code>, commit <code>{}</code></p>\n",
        escape(&page.title),
        escape(&page.source),
        escape(page.commit.as_str())
    ));
    html.push_str("<table><tr><th>App</th><th>State</th><th>Details</th></tr>\n");
    for app in &page.apps {
        let state = app.state.as_str();
        html.push_str(&format!(
            "<tr><td>{}</td><td class=\"{state}\">{state}</td><td>{}</td></tr>\n",
            escape(&app.app),
            escape(&app.description)
        ));
    }
    html.push_str("</table>\n<h2>Plan</h2>\n<pre>");
    html.push_str(&escape(&page.body));
    html.push_str("</pre>\n</body></html>\n");
    html
}

/// Escapes text for HTML element content and double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(n: u32) -> CommitId {
        CommitId::parse(&format!("{n:040x}")).unwrap()
    }

    #[test]
    fn everything_is_escaped() {
        let page = PlanPage {
            source: "<src>".into(),
            commit: commit(1),
            title: "deploy of <main>".into(),
            apps: vec![PageApp {
                app: "ns/<script>alert(1)</script>".into(),
                state: StatusState::Failure,
                description: "error: \"x\" & 'y'".into(),
            }],
            body: "+  image: <b>nginx</b>".into(),
        };
        let html = render_html(&page);
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(html.contains("ns/&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("error: &quot;x&quot; &amp; &#39;y&#39;"));
        assert!(html.contains("+  image: &lt;b&gt;nginx&lt;/b&gt;"));
    }

    #[test]
    fn store_keeps_at_most_max_bytes_of_pages() {
        let store = PlanStore::default();
        let big = |n: u32| PlanPage {
            source: "s".into(),
            commit: commit(n),
            title: format!("page {n}"),
            apps: vec![],
            body: "x".repeat(PlanStore::MAX_BYTES / 3),
        };
        for n in 0..4 {
            store.insert(big(n));
        }
        // Three thirds fit with room for nothing more: the oldest went.
        assert!(store.get(commit(0).as_str()).is_none());
        assert!((1..4).all(|n| store.get(commit(n).as_str()).is_some()));
        // A page bigger than the budget is still kept, alone.
        store.insert(PlanPage {
            body: "x".repeat(PlanStore::MAX_BYTES + 1),
            ..big(9)
        });
        assert!(store.get(commit(9).as_str()).is_some());
        assert!(store.get(commit(3).as_str()).is_none());
    }

    #[test]
    fn store_is_bounded_and_replaces() {
        let store = PlanStore::default();
        for n in 0..(PlanStore::CAPACITY as u32 + 5) {
            store.insert(PlanPage {
                source: "s".into(),
                commit: commit(n),
                title: format!("page {n}"),
                apps: vec![],
                body: String::new(),
            });
        }
        assert!(store.get(commit(0).as_str()).is_none());
        assert!(store.get(commit(5).as_str()).is_some());
        let last = commit(PlanStore::CAPACITY as u32 + 4);
        assert_eq!(
            store.get(last.as_str()).unwrap().title,
            format!("page {}", PlanStore::CAPACITY + 4)
        );
    }
}
