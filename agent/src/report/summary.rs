//! Counting a plan's changes: totals per action, and per kind, shared by every plan format.

use std::collections::BTreeMap;

use crate::plan::{Action, AppPlan, Change, Plan};

/// Number of changes per action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub delete: usize,
    pub conflict: usize,
    pub unchanged: usize,
}

/// Per kind, the number of changes per action; sorted by kind.
pub type KindCounts = BTreeMap<String, Summary>;

impl Summary {
    /// Totals over every app of `plan`.
    pub fn of_plan(plan: &Plan) -> Summary {
        let mut summary = Summary::default();
        for app in &plan.apps {
            summary.add_all(&app.changes);
        }
        summary
    }

    /// Totals of one app.
    pub fn of_app(app: &AppPlan) -> Summary {
        let mut summary = Summary::default();
        summary.add_all(&app.changes);
        summary
    }

    /// Changes per kind over every app of `plan`, unchanged objects included.
    pub fn by_kind(plan: &Plan) -> KindCounts {
        let mut counts = KindCounts::new();
        for change in plan.apps.iter().flat_map(|app| &app.changes) {
            counts
                .entry(change.object.kind.clone())
                .or_default()
                .add(change.action);
        }
        counts
    }

    /// True when anything would change.
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.delete + self.conflict > 0
    }

    fn add_all(&mut self, changes: &[Change]) {
        for change in changes {
            self.add(change.action);
        }
    }

    fn add(&mut self, action: Action) {
        let count = match action {
            Action::Create => &mut self.create,
            Action::Update => &mut self.update,
            Action::Delete => &mut self.delete,
            Action::Conflict => &mut self.conflict,
            Action::Unchanged => &mut self.unchanged,
        };
        *count += 1;
    }

    /// `N to create, N to update, N to delete, N conflicts` (Terraform's summary wording).
    pub fn sentence(&self) -> String {
        format!(
            "{} to create, {} to update, {} to delete, {} {}",
            self.create,
            self.update,
            self.delete,
            self.conflict,
            if self.conflict == 1 {
                "conflict"
            } else {
                "conflicts"
            }
        )
    }
}
