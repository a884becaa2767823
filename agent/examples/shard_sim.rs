//! Prints the sharding simulation: 100 replicas and 100,000 apps, a join, a leave and a crash
//! of a tenth of the replicas, with the apps moved and the largest load per algorithm.
//! `cargo run -p agent --example shard_sim [-- REPLICAS APPS]`.

fn main() {
    let mut args = std::env::args().skip(1);
    let n_members = args.next().and_then(|n| n.parse().ok()).unwrap_or(100);
    let n_apps = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let apps = agent::shard::sim::apps(n_apps);
    let rows = agent::shard::sim::simulate(
        &agent::shard::sim::scenarios(n_members),
        &apps,
        agent::shard::assign::DEFAULT_EPSILON,
    );
    print!(
        "{n_members} replicas, {n_apps} apps\n\n{}",
        agent::shard::sim::table(&rows)
    );
}
