//! Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018; the
//! algorithm Argo CD's `consistent-hashing` sharding uses): which member owns which app.
//!
//! Pure: members and app keys in, one owner per app out. Every replica computes the same
//! assignment from the same inputs, so no replica hands apps out and no assignment is stored.
//!
//! Each member has [`VIRTUAL_NODES`] points on a 64-bit ring. An app hashes to a point and
//! goes to the first member clockwise whose load is under the cap ⌈(1 + ε) × apps / members⌉,
//! so no member ever holds more than the cap. Apps are placed in the order of their own hash,
//! which makes the result independent of the order the caller lists them in. A member joining
//! or leaving moves about the share of apps that must move (1 / members), plus the few apps a
//! full member pushes one step further along the ring.
//!
//! Round-robin and plain consistent hashing are here too, for the simulation to compare with.

use sha2::{Digest, Sha256};

/// Points per member on the ring: enough that each member's arc is close to its share.
pub const VIRTUAL_NODES: usize = 100;

/// The default ε: a member may hold up to 25 % more apps than the average.
pub const DEFAULT_EPSILON: f64 = 0.25;

/// The most apps a member may hold: ⌈(1 + ε) × apps / members⌉ (0 without members).
#[must_use]
pub fn max_load(n_apps: usize, n_members: usize, epsilon: f64) -> usize {
    if n_members == 0 {
        return 0;
    }
    // Exact for any fleet that fits in memory: f64 holds integers up to 2^53.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "counts far below 2^53; the result is non-negative"
    )]
    let cap = ((1.0 + epsilon.max(0.0)) * n_apps as f64 / n_members as f64).ceil() as usize;
    // Never below the plain average, so every app has a place whatever rounding does.
    cap.max(n_apps.div_ceil(n_members))
}

/// A stable 64-bit hash (the first 8 bytes of SHA-256): the same on every replica, platform
/// and release, which `std`'s hashers do not promise.
#[must_use]
pub fn stable_hash(key: &str) -> u64 {
    let digest = Sha256::digest(key.as_bytes());
    let mut bytes = [0_u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// The members' points on the ring, sorted.
#[derive(Debug, Clone)]
pub struct Ring {
    /// `(point, member index)`, sorted by point.
    points: Vec<(u64, usize)>,
    n_members: usize,
}

impl Ring {
    /// The ring of `members` (their order does not matter: a point names its member by
    /// index, and points come from the member's name).
    #[must_use]
    pub fn new<M: AsRef<str>>(members: &[M]) -> Ring {
        Ring::with_points(members, VIRTUAL_NODES)
    }

    /// A ring with `points_per_member` points per member (the simulation compares counts).
    #[must_use]
    pub fn with_points<M: AsRef<str>>(members: &[M], points_per_member: usize) -> Ring {
        let mut points = Vec::with_capacity(members.len() * points_per_member);
        for (member_idx, member) in members.iter().enumerate() {
            for replica in 0..points_per_member {
                points.push((
                    stable_hash(&format!("{}#{replica}", member.as_ref())),
                    member_idx,
                ));
            }
        }
        // Ties (astronomically rare) are broken by member name order, the same everywhere.
        points.sort_unstable_by(|left, right| {
            left.0
                .cmp(&right.0)
                .then_with(|| members[left.1].as_ref().cmp(members[right.1].as_ref()))
        });
        Ring {
            points,
            n_members: members.len(),
        }
    }

    /// The ring positions from the app's point clockwise, all the way round.
    fn walk(&self, app_hash: u64) -> impl Iterator<Item = usize> + '_ {
        let start = self.points.partition_point(|(point, _)| *point < app_hash);
        let (before, after) = self.points.split_at(start);
        after
            .iter()
            .chain(before)
            .map(|(_, member_idx)| *member_idx)
    }
}

/// Bounded-load consistent hashing: for each app of `apps`, the index in `members` of its
/// owner. `None` for every app when there are no members.
#[must_use]
pub fn bounded<M: AsRef<str>, A: AsRef<str>>(
    members: &[M],
    apps: &[A],
    epsilon: f64,
) -> Vec<Option<usize>> {
    let ring = Ring::new(members);
    bounded_on(&ring, apps, epsilon)
}

/// [`bounded`] on a ring built once (the simulation reuses rings).
#[must_use]
pub fn bounded_on<A: AsRef<str>>(ring: &Ring, apps: &[A], epsilon: f64) -> Vec<Option<usize>> {
    let mut owners = vec![None; apps.len()];
    if ring.n_members == 0 {
        return owners;
    }
    let cap = max_load(apps.len(), ring.n_members, epsilon);
    let mut loads = vec![0_usize; ring.n_members];
    let mut order: Vec<(u64, usize)> = apps
        .iter()
        .enumerate()
        .map(|(app_idx, app)| (stable_hash(app.as_ref()), app_idx))
        .collect();
    // Ties of the hash fall back to the key, so the order is total.
    order.sort_unstable_by(|left, right| {
        left.0
            .cmp(&right.0)
            .then_with(|| apps[left.1].as_ref().cmp(apps[right.1].as_ref()))
    });
    for (app_hash, app_idx) in order {
        // The cap times the members is at least the apps, so some member always has room.
        let owner = ring
            .walk(app_hash)
            .find(|member_idx| loads[*member_idx] < cap);
        if let Some(member_idx) = owner {
            loads[member_idx] += 1;
            owners[app_idx] = Some(member_idx);
        }
    }
    owners
}

/// Plain consistent hashing (no bound): each app to the first member clockwise.
#[must_use]
pub fn plain_on<A: AsRef<str>>(ring: &Ring, apps: &[A]) -> Vec<Option<usize>> {
    apps.iter()
        .map(|app| ring.walk(stable_hash(app.as_ref())).next())
        .collect()
}

/// Round-robin as Argo CD's `round-robin` algorithm: apps sorted by key, the i-th to the
/// (i mod members)-th member in name order.
#[must_use]
pub fn round_robin<M: AsRef<str>, A: AsRef<str>>(members: &[M], apps: &[A]) -> Vec<Option<usize>> {
    let mut member_order: Vec<usize> = (0..members.len()).collect();
    member_order.sort_by(|left, right| members[*left].as_ref().cmp(members[*right].as_ref()));
    let mut app_order: Vec<usize> = (0..apps.len()).collect();
    app_order.sort_by(|left, right| apps[*left].as_ref().cmp(apps[*right].as_ref()));
    let mut owners = vec![None; apps.len()];
    if members.is_empty() {
        return owners;
    }
    for (rank, app_idx) in app_order.into_iter().enumerate() {
        owners[app_idx] = Some(member_order[rank % members.len()]);
    }
    owners
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}-{i}")).collect()
    }

    fn loads(owners: &[Option<usize>], n_members: usize) -> Vec<usize> {
        let mut loads = vec![0; n_members];
        for owner in owners.iter().flatten() {
            loads[*owner] += 1;
        }
        loads
    }

    /// Apps whose owner (by name) differs between two assignments of the same apps.
    fn moved(before: (&[String], &[Option<usize>]), after: (&[String], &[Option<usize>])) -> usize {
        before
            .1
            .iter()
            .zip(after.1)
            .filter(|(old, new)| old.map(|i| &before.0[i]) != new.map(|i| &after.0[i]))
            .count()
    }

    #[test]
    fn the_cap_is_the_ceiling_of_one_plus_epsilon_times_the_average() {
        assert_eq!(max_load(100, 4, 0.25), 32);
        assert_eq!(max_load(10, 3, 0.25), 5);
        assert_eq!(max_load(7, 7, 0.0), 1);
        assert_eq!(max_load(7, 2, 0.0), 4);
        assert_eq!(max_load(5, 0, 0.25), 0);
    }

    #[test]
    fn no_member_holds_more_than_the_cap_and_every_app_has_an_owner() {
        for (n_members, n_apps, epsilon) in [
            (3, 10, 0.25),
            (7, 1000, 0.25),
            (10, 999, 0.0),
            (4, 3, 0.1),
            (50, 5000, 0.05),
        ] {
            let members = names("replica", n_members);
            let apps = names("ns/app", n_apps);
            let owners = bounded(&members, &apps, epsilon);
            assert!(owners.iter().all(Option::is_some));
            let cap = max_load(n_apps, n_members, epsilon);
            let max = loads(&owners, n_members).into_iter().max().unwrap_or(0);
            assert!(
                max <= cap,
                "{n_members} members, {n_apps} apps: {max} > cap {cap}"
            );
        }
    }

    #[test]
    fn the_assignment_ignores_the_order_of_members_and_apps() {
        let members = names("replica", 5);
        let apps = names("ns/app", 300);
        let owners = bounded(&members, &apps, 0.25);
        let mut members_reversed = members.clone();
        members_reversed.reverse();
        let mut apps_reversed = apps.clone();
        apps_reversed.reverse();
        let owners_reversed = bounded(&members_reversed, &apps_reversed, 0.25);
        for (app_idx, app) in apps.iter().enumerate() {
            let back = apps_reversed.iter().position(|other| other == app).unwrap();
            assert_eq!(
                owners[app_idx].map(|i| &members[i]),
                owners_reversed[back].map(|i| &members_reversed[i]),
            );
        }
    }

    #[test]
    fn a_join_moves_about_the_new_members_share_and_only_to_it_mostly() {
        let apps = names("ns/app", 4000);
        let three = names("replica", 3);
        let four = names("replica", 4);
        let before = bounded(&three, &apps, 0.25);
        let after = bounded(&four, &apps, 0.25);
        let n_moved = moved((&three, &before), (&four, &after));
        // The ideal is a quarter (1,000); bounded loads adds a few displaced ones.
        assert!((900..=1600).contains(&n_moved), "moved {n_moved}");
        let to_new = after.iter().filter(|owner| **owner == Some(3)).count();
        assert!(
            to_new * 10 >= n_moved * 6,
            "{to_new} of {n_moved} went to the new member"
        );
        let round_robin_moved = moved(
            (&three, &round_robin(&three, &apps)),
            (&four, &round_robin(&four, &apps)),
        );
        assert!(
            round_robin_moved > 2 * n_moved,
            "round-robin moved {round_robin_moved}"
        );
    }

    #[test]
    fn a_leave_moves_the_leavers_apps_and_few_others() {
        let apps = names("ns/app", 4000);
        let five = names("replica", 5);
        let four: Vec<String> = five.iter().filter(|m| *m != "replica-2").cloned().collect();
        let before = bounded(&five, &apps, 0.25);
        let after = bounded(&four, &apps, 0.25);
        let leaver_apps = before.iter().filter(|owner| **owner == Some(2)).count();
        let n_moved = moved((&five, &before), (&four, &after));
        assert!(n_moved >= leaver_apps);
        assert!(
            n_moved <= leaver_apps * 2,
            "moved {n_moved}, the leaver had {leaver_apps}"
        );
    }

    #[test]
    fn no_members_owns_nothing() {
        let none: [&str; 0] = [];
        assert_eq!(bounded(&none, &["a/b"], 0.25), vec![None]);
        assert_eq!(round_robin(&none, &["a/b"]), vec![None]);
    }
}
