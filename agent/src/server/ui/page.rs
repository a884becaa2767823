//! The UI's HTML: the layout, the apps list and the app page, rendered on the server as plain
//! strings. Every piece of text goes through [`esc`]: app names, messages, diffs, commit
//! summaries and authors come from the user's repository and the cluster.
//!
//! Each page has one live region (`<div id="live">`): the event stream makes `ui.js` fetch the
//! page again and swap that region, so filters being typed and focus outside it survive.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use super::live_tree::LiveNode;
use super::state::{AppFilter, AppPage, AppView, ForgeLinks, SyncState};
use crate::health::HealthStatus;
use crate::plan::Action;
use crate::server::plan_page::escape as esc;
use crate::workflow::{StepPhase, WorkflowState};

/// Who is looking, for what the page offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// May read every page.
    ReadOnly,
    /// May also resume workflows and approve rollout batches.
    Operator,
}

/// Health values the list filters by (`none`: nothing rates the app).
pub const HEALTH_CHOICES: [&str; 5] = ["healthy", "progressing", "degraded", "unknown", "none"];

/// The whole document around `body` (whose live region the caller includes).
pub fn layout(title: &str, viewer: Viewer, body: &str) -> String {
    let role = match viewer {
        Viewer::ReadOnly => "viewer",
        Viewer::Operator => "operator",
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · driftless</title>\
         <link rel=\"stylesheet\" href=\"/ui/assets/ui.css\">\
         <script src=\"/ui/assets/ui.js\" defer></script></head>\n<body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header><nav aria-label=\"main\"><a class=\"brand\" href=\"/ui/apps\">driftless</a>\
         <a href=\"/ui/apps\">Apps</a><span class=\"role\" data-role=\"{role}\">signed in as {role}</span>\
         <form method=\"post\" action=\"/ui/logout\"><button type=\"submit\">Sign out</button></form>\
         </nav></header>\n<main id=\"main\" tabindex=\"-1\">{body}</main>\
         <p class=\"live-status\" id=\"live-status\" role=\"status\" aria-live=\"polite\"></p></body></html>\n",
        title = esc(title),
    )
}

/// The apps list: filters, counts, one page of rows and the pager.
pub fn apps_page(
    filter: &AppFilter,
    page: &AppPage,
    page_index: usize,
    page_size: usize,
) -> String {
    let mut html = String::with_capacity(16 << 10);
    html.push_str("<h1>Apps</h1>\n");
    filter_form(&mut html, filter, page);
    html.push_str("<div id=\"live\">");
    apps_live(&mut html, filter, page, page_index, page_size);
    html.push_str("</div>");
    html
}

fn filter_form(html: &mut String, filter: &AppFilter, page: &AppPage) {
    html.push_str(
        "<form class=\"filters\" method=\"get\" action=\"/ui/apps\" role=\"search\">\
         <label>Name <input type=\"search\" name=\"q\" id=\"search\" placeholder=\"namespace/name\" \
         aria-keyshortcuts=\"/\" value=\"",
    );
    html.push_str(&esc(&filter.search));
    html.push_str("\"></label>");
    select(
        html,
        "Source",
        "source",
        &filter.source,
        page.sources.iter().map(String::as_str),
    );
    select(
        html,
        "Namespace",
        "namespace",
        &filter.namespace,
        page.namespaces.iter().map(String::as_str),
    );
    select(
        html,
        "Health",
        "health",
        &filter.health,
        HEALTH_CHOICES.into_iter(),
    );
    let state = filter.sync.map_or("", SyncState::slug);
    select(
        html,
        "State",
        "state",
        state,
        SyncState::ALL.iter().map(|state| state.slug()),
    );
    html.push_str("<button type=\"submit\">Filter</button></form>\n");
}

fn select<'a>(
    html: &mut String,
    label: &str,
    name: &str,
    chosen: &str,
    choices: impl Iterator<Item = &'a str>,
) {
    let _ = write!(
        html,
        "<label>{label} <select name=\"{name}\"><option value=\"\">any</option>"
    );
    for choice in choices {
        let selected = if choice == chosen { " selected" } else { "" };
        let _ = write!(
            html,
            "<option value=\"{value}\"{selected}>{value}</option>",
            value = esc(choice)
        );
    }
    html.push_str("</select></label>");
}

/// The list's live region.
pub fn apps_live(
    html: &mut String,
    filter: &AppFilter,
    page: &AppPage,
    page_index: usize,
    page_size: usize,
) {
    html.push_str("<p class=\"counts\">");
    let _ = write!(html, "{} apps", page.total);
    for (state, count) in &page.by_state {
        let _ = write!(
            html,
            " · <a href=\"/ui/apps?state={slug}\" class=\"badge state-{slug}\">{count} {word}</a>",
            slug = state.slug(),
            word = state.as_str()
        );
    }
    html.push_str("</p>\n");
    if page.rows.is_empty() {
        html.push_str("<p class=\"empty\">No app matches these filters.</p>");
    } else {
        html.push_str(
            "<div class=\"table-wrap\"><table class=\"apps\"><caption class=\"sr-only\">Apps</caption>\
             <thead><tr><th scope=\"col\">App</th><th scope=\"col\">Source</th>\
             <th scope=\"col\">Clusters</th><th scope=\"col\">Health</th><th scope=\"col\">State</th>\
             <th scope=\"col\">Commit</th><th scope=\"col\">Last apply</th>\
             <th scope=\"col\">Commit to live</th></tr></thead><tbody>\n",
        );
        for view in &page.rows {
            app_row(html, view);
        }
        html.push_str("</tbody></table></div>\n");
    }
    let n_pages = page.matching.div_ceil(page_size).max(1);
    let _ = write!(
        html,
        "<nav class=\"pager\" aria-label=\"pages\"><span>{} matching · page {} of {n_pages}</span>",
        page.matching,
        page_index + 1
    );
    if page_index > 0 {
        let _ = write!(
            html,
            " <a rel=\"prev\" href=\"{}\">← Previous</a>",
            esc(&list_url(filter, page_index - 1))
        );
    }
    if page_index + 1 < n_pages {
        let _ = write!(
            html,
            " <a rel=\"next\" href=\"{}\">Next →</a>",
            esc(&list_url(filter, page_index + 1))
        );
    }
    html.push_str("</nav>");
}

fn app_row(html: &mut String, view: &AppView) {
    let app = view.app.to_string();
    let _ = writeln!(
        html,
        "<tr data-app=\"{app_attr}\"><th scope=\"row\"><a href=\"{href}\">{app_text}</a></th>\
         <td>{source}</td><td>{clusters}</td><td class=\"health\">{health}</td>\
         <td class=\"state\">{state}</td><td>{commit}</td><td>{applied}</td><td>{live}</td></tr>",
        app_attr = esc(&app),
        href = esc(&app_url(&view.app)),
        app_text = esc(&app),
        source = esc(&view.source),
        clusters = esc(&view.clusters.join(", ")),
        health = health_badge(view.health, &view.health_message),
        state = state_badge(view.sync, &view.message),
        commit = view
            .commit
            .as_ref()
            .map_or_else(String::new, |commit| format!(
                "<code title=\"{}\">{}</code>",
                esc(&commit.summary),
                esc(short(&commit.id))
            )),
        applied = view.last_apply.map_or_else(
            || "—".to_owned(),
            |(at, took)| format!("{} <small>({})</small>", time(at), duration(took))
        ),
        live = view.commit_to_live.map_or_else(|| "—".to_owned(), duration),
    );
}

/// One app's page.
pub struct AppPageInput<'a> {
    pub view: &'a AppView,
    pub links: Option<&'a ForgeLinks>,
    pub tree: Result<Vec<LiveNode>, String>,
    pub viewer: Viewer,
    /// A message after an action (`resumed step approve`), or its refusal.
    pub notice: Option<&'a str>,
}

pub fn app_page(input: &AppPageInput<'_>) -> String {
    let view = input.view;
    let mut html = String::with_capacity(32 << 10);
    let _ = write!(
        html,
        "<p class=\"crumbs\"><a href=\"/ui/apps\">Apps</a> / {ns}</p><h1>{name}</h1>",
        ns = esc(&view.app.namespace),
        name = esc(&view.app.name)
    );
    if let Some(notice) = input.notice {
        let _ = write!(
            html,
            "<p class=\"notice\" role=\"alert\">{}</p>",
            esc(notice)
        );
    }
    html.push_str("<div id=\"live\">");
    summary(&mut html, input);
    objects_section(&mut html, &input.tree);
    workflow_section(&mut html, input);
    plan_section(&mut html, view);
    history_section(&mut html, view, input.links);
    html.push_str("</div>");
    html
}

fn summary(html: &mut String, input: &AppPageInput<'_>) {
    let view = input.view;
    let _ = write!(
        html,
        "<p class=\"status\"><span class=\"state\">{}</span> <span class=\"health\">{}</span> {}</p><dl class=\"facts\">",
        state_badge(view.sync, &view.message),
        health_badge(view.health, &view.health_message),
        esc(&view.message)
    );
    fact(html, "Source", &esc(&view.source));
    fact(html, "Namespace", &esc(&view.app.namespace));
    fact(html, "Clusters", &esc(&view.clusters.join(", ")));
    if let Some(commit) = &view.commit {
        let id = match input.links {
            Some(links) => format!(
                "<a href=\"{}\"><code>{}</code></a>",
                esc(&links.commit(&commit.id)),
                esc(short(&commit.id))
            ),
            None => format!("<code>{}</code>", esc(short(&commit.id))),
        };
        fact(
            html,
            "Commit",
            &format!(
                "{id} {} <small>by {}</small> · <a href=\"/plans/{}\">plan page</a>",
                esc(&commit.summary),
                esc(&commit.author),
                esc(&commit.id)
            ),
        );
    }
    if let Some((at, took)) = view.last_apply {
        fact(
            html,
            "Last apply",
            &format!("{} (deploy took {})", time(at), duration(took)),
        );
    }
    fact(
        html,
        "Commit to live",
        &view
            .commit_to_live
            .map_or_else(|| "not known".to_owned(), duration),
    );
    if !view.previews.is_empty() {
        let mut pulls = String::new();
        for pull in &view.previews {
            let text = format!("#{} {}", pull.number, pull.summary);
            match input.links {
                Some(links) => {
                    let _ = write!(
                        pulls,
                        "<a href=\"{}\">{}</a> ",
                        esc(&links.pull(pull.number)),
                        esc(&text)
                    );
                }
                None => pulls.push_str(&esc(&text)),
            }
        }
        fact(html, "Open pull requests changing it", &pulls);
    }
    html.push_str("</dl>");
}

fn fact(html: &mut String, term: &str, value_html: &str) {
    let _ = write!(html, "<dt>{term}</dt><dd>{value_html}</dd>");
}

fn objects_section(html: &mut String, tree: &Result<Vec<LiveNode>, String>) {
    html.push_str("<section aria-labelledby=\"objects\"><h2 id=\"objects\">Objects</h2>");
    match tree {
        Err(message) => {
            let _ = write!(html, "<p class=\"empty\">{}</p>", esc(message));
        }
        Ok(nodes) if nodes.is_empty() => {
            html.push_str("<p class=\"empty\">No objects planned yet.</p>");
        }
        Ok(nodes) => {
            html.push_str("<ul class=\"tree\">");
            for node in nodes {
                tree_node(html, node);
            }
            html.push_str("</ul>");
        }
    }
    html.push_str("</section>");
}

fn tree_node(html: &mut String, node: &LiveNode) {
    let _ = write!(
        html,
        "<li data-object=\"{object}\"><span class=\"label\">{label}</span> <code>{object}</code> {health}",
        label = esc(&node.label),
        object = esc(&node.object.to_string()),
        health = match &node.health {
            Some(health) => health_badge(Some(health.status), &health.message),
            None if node.missing =>
                "<span class=\"badge health-missing\">missing</span>".to_owned(),
            None => String::new(),
        }
    );
    if let Some(health) = &node.health
        && !health.message.is_empty()
    {
        let _ = write!(html, " <small>{}</small>", esc(&health.message));
    }
    if !node.children.is_empty() {
        html.push_str("<ul>");
        for child in &node.children {
            tree_node(html, child);
        }
        html.push_str("</ul>");
    }
    html.push_str("</li>");
}

fn workflow_section(html: &mut String, input: &AppPageInput<'_>) {
    let Some(workflow) = &input.view.workflow else {
        return;
    };
    let _ = write!(
        html,
        "<section aria-labelledby=\"workflow\"><h2 id=\"workflow\">Workflow</h2>\
         <p>Revision <code>{}</code>: <span class=\"badge phase-{phase:?}\">{phase:?}</span></p>\
         <div class=\"table-wrap\"><table class=\"steps\"><thead><tr><th scope=\"col\">Step</th>\
         <th scope=\"col\">Phase</th><th scope=\"col\">Message</th><th scope=\"col\">Action</th></tr></thead><tbody>",
        esc(short(&workflow.revision)),
        phase = workflow.phase,
    );
    // In the order they ran (the state keeps steps by name), steps not started yet last.
    let mut steps: Vec<_> = workflow.steps.iter().collect();
    steps.sort_by_key(|(name, step)| (step.started_at.map_or(u64::MAX, |at| at.0), *name));
    for (name, step) in steps {
        let action = if step.phase == StepPhase::Suspending && !step.resumed {
            action_button(input, name, "Resume")
        } else if step.resumed && !step.phase.is_finished() {
            "resumed".to_owned()
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<tr data-step=\"{name}\"><th scope=\"row\">{name}</th><td class=\"phase\">{phase}</td><td>{message}</td><td>{action}</td></tr>",
            name = esc(name),
            phase = step.phase.as_str(),
            message = esc(step.message.as_deref().unwrap_or("")),
        );
    }
    html.push_str("</tbody></table></div>");
    rollouts(html, input, workflow);
    html.push_str("</section>");
}

fn rollouts(html: &mut String, input: &AppPageInput<'_>, workflow: &WorkflowState) {
    if workflow.rollouts.is_empty() {
        return;
    }
    html.push_str("<h3>Rollout batches</h3><ul class=\"rollouts\">");
    for (step, rollout) in &workflow.rollouts {
        let action = if rollout.awaits_approval() {
            action_button(input, step, &format!("Approve batch {}", rollout.batch + 2))
        } else {
            String::new()
        };
        let _ = write!(
            html,
            "<li data-rollout=\"{step}\">Step <strong>{step}</strong>: batch {batch}, {phase} {action}</li>",
            step = esc(step),
            batch = rollout.batch + 1,
            phase = esc(&format!("{:?}", rollout.phase)),
        );
    }
    html.push_str("</ul>");
}

/// The form that resumes `step`, for operators; a note for everyone else.
fn action_button(input: &AppPageInput<'_>, step: &str, label: &str) -> String {
    match input.viewer {
        Viewer::Operator => format!(
            "<form method=\"post\" action=\"{url}/resume\"><input type=\"hidden\" name=\"step\" value=\"{step}\">\
             <button type=\"submit\" class=\"act\">{label}</button></form>",
            url = esc(&app_url(&input.view.app)),
            step = esc(step),
            label = esc(label)
        ),
        Viewer::ReadOnly => {
            "<small class=\"not-allowed\">waiting for an operator</small>".to_owned()
        }
    }
}

fn plan_section(html: &mut String, view: &AppView) {
    html.push_str("<section aria-labelledby=\"plan\"><h2 id=\"plan\">Last plan</h2>");
    let Some(plan) = &view.plan else {
        html.push_str("<p class=\"empty\">Not planned yet.</p></section>");
        return;
    };
    let _ = write!(
        html,
        "<p>{} of <code>{}</code>: {} change(s). Secret values are masked.</p>",
        plan.purpose,
        esc(short(&plan.commit)),
        plan.changes.len()
    );
    if !plan.diagnostics.is_empty() {
        html.push_str("<ul class=\"diagnostics\">");
        for diagnostic in &plan.diagnostics {
            let _ = write!(html, "<li>{}</li>", esc(diagnostic));
        }
        html.push_str("</ul>");
    }
    for change in &plan.changes {
        let _ = write!(
            html,
            "<details><summary><span class=\"action action-{action}\">{action}</span> <code>{object}</code> on {cluster}{reason}</summary>",
            action = change.action.as_str(),
            object = esc(&change.object.to_string()),
            cluster = esc(&change.cluster),
            reason = change
                .reason
                .as_ref()
                .map_or_else(String::new, |reason| format!(" — {}", esc(reason))),
        );
        if !change.diff.is_empty() {
            html.push_str("<pre class=\"diff\">");
            let whole = change.action != Action::Update;
            for line in change.diff.lines() {
                let class = match line.as_bytes().first() {
                    Some(b'+') if !whole => "add",
                    Some(b'-') if !whole => "del",
                    _ => "",
                };
                let _ = writeln!(html, "<span class=\"{class}\">{}</span>", esc(line));
            }
            html.push_str("</pre>");
        }
        html.push_str("</details>");
    }
    if plan.truncated {
        html.push_str("<p>Longer diffs are cut here; the plan page has the whole plan.</p>");
    }
    html.push_str("</section>");
}

fn history_section(html: &mut String, view: &AppView, links: Option<&ForgeLinks>) {
    html.push_str("<section aria-labelledby=\"history\"><h2 id=\"history\">Deploy history</h2>");
    if view.history.is_empty() {
        html.push_str("<p class=\"empty\">No deploy yet.</p></section>");
        return;
    }
    html.push_str(
        "<div class=\"table-wrap\"><table class=\"history\"><thead><tr><th scope=\"col\">Commit</th>\
         <th scope=\"col\">Author</th><th scope=\"col\">Result</th><th scope=\"col\">Duration</th>\
         <th scope=\"col\">Finished</th></tr></thead><tbody>",
    );
    for record in &view.history {
        let commit = match links {
            Some(links) => format!(
                "<a href=\"{}\"><code>{}</code></a>",
                esc(&links.commit(&record.commit.id)),
                esc(short(&record.commit.id))
            ),
            None => format!("<code>{}</code>", esc(short(&record.commit.id))),
        };
        let _ = write!(
            html,
            "<tr><td>{commit} {summary}</td><td>{author}</td><td><span class=\"badge result-{result}\" title=\"{message}\">{result}</span></td>\
             <td>{took}</td><td>{at}</td></tr>",
            summary = esc(&record.commit.summary),
            author = esc(&record.commit.author),
            result = record.result.as_str(),
            message = esc(&record.message),
            took = duration(record.duration),
            at = time(record.finished_at),
        );
    }
    html.push_str("</tbody></table></div></section>");
}

fn state_badge(state: SyncState, message: &str) -> String {
    format!(
        "<span class=\"badge state-{slug}\" data-state=\"{slug}\" title=\"{title}\">{word}</span>",
        slug = state.slug(),
        word = state.as_str(),
        title = esc(message)
    )
}

fn health_badge(health: Option<HealthStatus>, message: &str) -> String {
    let word = health.map_or("none", HealthStatus::as_str);
    format!(
        "<span class=\"badge health-{word}\" data-health=\"{word}\" title=\"{}\">{word}</span>",
        esc(message)
    )
}

/// The app page's path.
pub fn app_url(app: &analyzer::AppRef) -> String {
    format!(
        "/ui/apps/{}/{}",
        url_segment(&app.namespace),
        url_segment(&app.name)
    )
}

/// The list's URL for `filter` at `page`.
pub fn list_url(filter: &AppFilter, page: usize) -> String {
    let mut url = String::from("/ui/apps?");
    for (name, value) in [
        ("q", filter.search.as_str()),
        ("source", filter.source.as_str()),
        ("namespace", filter.namespace.as_str()),
        ("health", filter.health.as_str()),
        ("state", filter.sync.map_or("", SyncState::slug)),
    ] {
        if !value.is_empty() {
            let _ = write!(url, "{name}={}&", url_segment(value));
        }
    }
    let _ = write!(url, "page={}", page + 1);
    url
}

/// Percent-encodes everything but unreserved characters.
fn url_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

fn time(at: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(at)
        .format("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}

fn duration(took: Duration) -> String {
    let seconds = took.as_secs_f64();
    if seconds < 60.0 {
        format!("{seconds:.1} s")
    } else {
        format!("{}m {:02}s", took.as_secs() / 60, took.as_secs() % 60)
    }
}
