//! The sharding simulation: a fleet of members and apps, membership changes (a join, a
//! graceful leave, a crash of several members at once), and for each algorithm the apps that
//! moved and the largest load. Pure; `cargo run -p agent --example shard_sim` prints it, and
//! the tests below hold bounded-load hashing to its bound and to moving little.

use std::fmt::Write as _;

use super::assign::{self, Ring};

/// The algorithms compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Consistent hashing with bounded loads, with this many ring points per member (the
    /// agent uses [`assign::VIRTUAL_NODES`]).
    BoundedConsistentHashing(usize),
    /// Consistent hashing without a bound, with this many ring points per member.
    ConsistentHashing(usize),
    /// Apps sorted by key, dealt out in member order.
    RoundRobin,
}

impl Algorithm {
    /// What the simulation compares: the agent's choice, then the same with few ring points
    /// (where the bound matters), plain hashing with both, and round-robin.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::BoundedConsistentHashing(assign::VIRTUAL_NODES),
        Algorithm::ConsistentHashing(assign::VIRTUAL_NODES),
        Algorithm::BoundedConsistentHashing(4),
        Algorithm::ConsistentHashing(4),
        Algorithm::RoundRobin,
    ];

    #[must_use]
    pub fn label(self) -> String {
        match self {
            Algorithm::BoundedConsistentHashing(points) => {
                format!("bounded consistent hashing, {points} points/replica")
            }
            Algorithm::ConsistentHashing(points) => {
                format!("consistent hashing, {points} points/replica")
            }
            Algorithm::RoundRobin => "round-robin".to_owned(),
        }
    }

    fn owners(self, members: &[String], apps: &[String], epsilon: f64) -> Vec<Option<String>> {
        let owners = match self {
            Algorithm::BoundedConsistentHashing(points) => {
                assign::bounded_on(&Ring::with_points(members, points), apps, epsilon)
            }
            Algorithm::ConsistentHashing(points) => {
                assign::plain_on(&Ring::with_points(members, points), apps)
            }
            Algorithm::RoundRobin => assign::round_robin(members, apps),
        };
        owners
            .into_iter()
            .map(|owner| owner.map(|member_idx| members[member_idx].clone()))
            .collect()
    }
}

/// One membership change.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub before: Vec<String>,
    pub after: Vec<String>,
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: &'static str,
    pub algorithm: Algorithm,
    pub moved: usize,
    /// The fewest apps the change must move: the apps of members that left, or the new
    /// members' share of the average.
    pub must_move: usize,
    /// The largest load after the change, and the bound ⌈(1 + ε) × average⌉.
    pub max_load: usize,
    pub cap: usize,
}

/// The members `replica-0` … `replica-(n-1)`.
#[must_use]
pub fn members(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("replica-{i}")).collect()
}

/// Apps named as the agent keys them (`namespace/name`), ten namespaces.
#[must_use]
pub fn apps(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("team-{}/app-{i}", i % 10)).collect()
}

/// Join (one member more), leave (one member fewer) and crash (a tenth of the members at once).
#[must_use]
pub fn scenarios(n_members: usize) -> Vec<Scenario> {
    let fleet = members(n_members);
    let mut joined = fleet.clone();
    joined.push(format!("replica-{n_members}"));
    let left: Vec<String> = fleet
        .iter()
        .filter(|member| **member != format!("replica-{}", n_members / 3))
        .cloned()
        .collect();
    let crashed: Vec<String> = fleet
        .iter()
        .enumerate()
        .filter(|(member_idx, _)| member_idx % 10 != 7)
        .map(|(_, member)| member.clone())
        .collect();
    vec![
        Scenario {
            name: "join 1",
            before: fleet.clone(),
            after: joined,
        },
        Scenario {
            name: "leave 1",
            before: fleet.clone(),
            after: left,
        },
        Scenario {
            name: "crash 10%",
            before: fleet,
            after: crashed,
        },
    ]
}

/// Runs every scenario with every algorithm.
#[must_use]
pub fn simulate(scenarios: &[Scenario], apps: &[String], epsilon: f64) -> Vec<Row> {
    let mut rows = Vec::new();
    for scenario in scenarios {
        for algorithm in Algorithm::ALL {
            let before = algorithm.owners(&scenario.before, apps, epsilon);
            let after = algorithm.owners(&scenario.after, apps, epsilon);
            let moved = before
                .iter()
                .zip(&after)
                .filter(|(old, new)| old != new)
                .count();
            let left_members_apps = before
                .iter()
                .flatten()
                .filter(|owner| !scenario.after.contains(owner))
                .count();
            let n_joined = scenario
                .after
                .iter()
                .filter(|member| !scenario.before.contains(member))
                .count();
            let must_move = left_members_apps + n_joined * apps.len() / scenario.after.len().max(1);
            rows.push(Row {
                scenario: scenario.name,
                algorithm,
                moved,
                must_move,
                max_load: max_load_of(&after),
                cap: assign::max_load(apps.len(), scenario.after.len(), epsilon),
            });
        }
    }
    rows
}

fn max_load_of(owners: &[Option<String>]) -> usize {
    let mut loads = std::collections::BTreeMap::<&str, usize>::new();
    for owner in owners.iter().flatten() {
        *loads.entry(owner).or_default() += 1;
    }
    loads.into_values().max().unwrap_or(0)
}

/// The rows as a markdown table.
#[must_use]
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| change | algorithm | apps moved | must move | max load | bound ⌈(1 + ε) × avg⌉ |\n|---|---|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            row.scenario,
            row.algorithm.label(),
            row.moved,
            row.must_move,
            row.max_load,
            row.cap
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fleet of the issue: 100 members, 100,000 apps.
    #[test]
    fn a_hundred_members_and_a_hundred_thousand_apps() {
        let apps = apps(100_000);
        let rows = simulate(&scenarios(100), &apps, assign::DEFAULT_EPSILON);
        println!("{}", table(&rows));
        let row = |scenario: &str, algorithm: Algorithm| {
            rows.iter()
                .find(|row| row.scenario == scenario && row.algorithm == algorithm)
                .expect("every scenario runs every algorithm")
        };
        let agents = Algorithm::BoundedConsistentHashing(assign::VIRTUAL_NODES);
        for scenario in ["join 1", "leave 1", "crash 10%"] {
            for algorithm in [agents, Algorithm::BoundedConsistentHashing(4)] {
                let bounded = row(scenario, algorithm);
                assert!(
                    bounded.max_load <= bounded.cap,
                    "{scenario}: over the bound"
                );
            }
            // Few ring points: plain hashing overloads some replica past the bound.
            let plain_few = row(scenario, Algorithm::ConsistentHashing(4));
            assert!(
                plain_few.max_load > plain_few.cap,
                "{scenario}: plain hashing within the bound?"
            );
            let bounded = row(scenario, agents);
            assert!(
                bounded.max_load <= bounded.cap,
                "{scenario}: over the bound"
            );
            assert!(
                bounded.moved >= bounded.must_move,
                "{scenario}: fewer than must move?"
            );
            // Far fewer moves than round-robin, and within a small factor of the minimum.
            let round_robin = row(scenario, Algorithm::RoundRobin);
            assert!(
                bounded.moved * 5 < round_robin.moved,
                "{scenario}: {} moved against round-robin's {}",
                bounded.moved,
                round_robin.moved
            );
            assert!(
                bounded.moved <= bounded.must_move * 3,
                "{scenario}: {} moved, {} must",
                bounded.moved,
                bounded.must_move
            );
            // Plain hashing never moves more than the bounded form of itself.
            let plain = row(
                scenario,
                Algorithm::ConsistentHashing(assign::VIRTUAL_NODES),
            );
            assert!(plain.moved <= bounded.moved);
        }
    }
}
