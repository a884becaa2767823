//! The `/shards` page: the live members, the leader, and per source which replica owns which
//! apps, as this replica assigns them. Plain text; served behind the plan pages' credentials.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Shards;

/// The page's text.
#[must_use]
pub fn render(shards: &Shards) -> String {
    let view = shards.view();
    let config = shards.config();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replica {} ({}), Leases in namespace {}, lease duration {}s, ε {}",
        shards.me(),
        if view.leader {
            "leader"
        } else {
            "not the leader"
        },
        config.namespace,
        config.lease_duration.as_secs(),
        config.epsilon,
    );
    let _ = writeln!(
        out,
        "live members ({}): {}",
        view.members.len(),
        view.members.join(", ")
    );
    for (source, owners) in shards.assignments() {
        let mut per_member: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (app, owner) in &owners {
            per_member.entry(owner).or_default().push(app);
        }
        let cap = super::assign::max_load(owners.len(), view.members.len(), config.epsilon);
        let _ = writeln!(
            out,
            "\nsource {source}: {} apps, at most {cap} per replica",
            owners.len()
        );
        for (member, apps) in per_member {
            let _ = writeln!(out, "  {member} ({} apps): {}", apps.len(), apps.join(" "));
        }
    }
    out
}
