//! Disjunctions: expanding a vertex's disjunctions into one cloned vertex per alternative with
//! the spec's default rules, and the fast path for disjunctions of atoms.

use smallvec::SmallVec;

use crate::ast::{BinaryOp, Expr, UnaryOp};
use crate::eval::val::{Atom, Conflict, Shape, atom_conflict};
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::{Conj, ConjKind, Conjs, Engine, R, State, VId};

/// Most alternatives a disjunction expansion may produce.
const MAX_DISJUNCTS: usize = 512;

/// Marks an error of an alternative of a disjunction none of whose alternatives held.
const IN_EMPTY_DISJUNCTION: &str = " (in empty disjunction)";

/// The alternatives of one disjunction being expanded, with their default flags: inline up to
/// four, like [`Terms`].
type Alts<'a> = SmallVec<[(Conj<'a>, bool); 4]>;

/// Terms of a disjunction with their default marks, inline up to four (most disjunctions in
/// KubeVela templates have two or three terms, and they are expanded on every evaluation).
type Terms<'a> = SmallVec<[(&'a Expr, bool); 4]>;

impl<'a> Engine<'a> {
    pub(super) fn expand_disjunctions(&mut self, v: VId) {
        let disjs = self.vm(v).take_disjs();
        let sets = disjunction_sets(&disjs);
        if self.atomic_disjunction(v, &sets) {
            return;
        }
        let total: usize = sets
            .iter()
            .map(|set| set.len())
            .try_fold(1usize, |acc, n| acc.checked_mul(n))
            .unwrap_or(usize::MAX);
        if total > MAX_DISJUNCTS {
            let span = self.v(v).span;
            let error = self.err(
                v,
                ErrorKind::Unsupported,
                "unsupported: disjunction with too many alternatives",
                vec![span],
            );
            self.add_error(v, error);
            return;
        }
        let mut survivors: Vec<(VId, bool)> = Vec::new();
        let mut failures: Vec<Error> = Vec::new();
        let mut choice = vec![0usize; sets.len()];
        loop {
            let z = self.clone_state(v);
            let mut is_default = true;
            for (set, &i) in sets.iter().zip(&choice) {
                let (conj, flag) = &set[i];
                is_default &= *flag;
                let c = conj.clone();
                self.add_conj(z, c.kind, c.env, c.close, c.grp, true);
            }
            self.eval_vertex(z);
            let errors = self.deep_errors(z, 0);
            if errors.is_empty() {
                // An alternative that is itself a disjunction contributes its alternatives.
                if let Some(alts) = self.v(z).alts.clone() {
                    for (alt, flag) in alts {
                        survivors.push((alt, flag && is_default));
                    }
                } else {
                    survivors.push((self.deref(z), is_default));
                }
            } else {
                failures.extend(errors);
            }
            // Next combination.
            let mut k = 0;
            loop {
                if k == choice.len() {
                    break;
                }
                choice[k] += 1;
                if choice[k] < sets[k].len() {
                    break;
                }
                choice[k] = 0;
                k += 1;
            }
            if k == choice.len() {
                break;
            }
        }
        self.settle_disjunction(v, survivors, failures);
    }

    /// Settles an expanded disjunction: equal alternatives merged (a default if any of them
    /// is), then an error when none survived, the value itself when one did, or the
    /// alternatives.
    fn settle_disjunction(&mut self, v: VId, survivors: Vec<(VId, bool)>, failures: Vec<Error>) {
        // Merge equal alternatives.
        let mut unique: Vec<(VId, bool)> = Vec::new();
        for (alt, flag) in survivors {
            if let Some(existing) = unique.iter_mut().find(|(u, _)| self.same_value(*u, alt, 0)) {
                existing.1 |= flag;
            } else {
                unique.push((alt, flag));
            }
        }
        match unique.len() {
            0 => {
                let span = self.v(v).span;
                if failures.is_empty() {
                    let error = self.err(v, ErrorKind::Conflict, "empty disjunction", vec![span]);
                    self.add_error(v, error);
                }
                let n = failures.len();
                for mut failure in failures {
                    // Once: a disjunction nested in itself would lengthen it at every level.
                    if n > 1 && !failure.message.ends_with(IN_EMPTY_DISJUNCTION) {
                        failure.message.push_str(IN_EMPTY_DISJUNCTION);
                    }
                    self.add_error(v, failure);
                }
            }
            1 => self.vm(v).forward = Some(unique[0].0),
            _ => self.vm(v).alts = Some(unique),
        }
    }

    /// Fast path for the most common disjunction, a single one over scalars and types
    /// (`*"ClusterIP" | "NodePort"`, `*1 | int`) on a vertex that is not a struct or list:
    /// alternatives are checked on shapes, without cloning vertices. Returns false (having
    /// changed nothing) when it does not apply.
    fn atomic_disjunction(&mut self, v: VId, sets: &[Alts<'a>]) -> bool {
        let [set] = sets else { return false };
        {
            let vx = self.v(v);
            if !vx.arcs.is_empty()
                || vx.list.is_some()
                || vx.is_struct
                || vx.struct_hint
                || !vx.pending().is_empty()
                || !vx.errors.is_empty()
            {
                return false;
            }
        }
        // Disjunctions have a few alternatives: these three stay on the stack (one to three heap
        // vectors per disjunction otherwise, ~60 K disjunctions per 1,000 apps).
        let mut results: SmallVec<[(R, Span, bool); 4]> = SmallVec::new();
        for (conj, flag) in set {
            let ConjKind::Expr(expr) = conj.kind else {
                return false;
            };
            if !matches!(
                expr,
                Expr::Null(_)
                    | Expr::Bool(..)
                    | Expr::Number { .. }
                    | Expr::String { .. }
                    | Expr::Ident(_)
                    | Expr::Unary { .. }
                    | Expr::Top(_)
            ) {
                return false;
            }
            let r = self.eval_expr(expr, conj.env);
            match r {
                R::Atom(_) | R::Kinds(_) | R::Valid(_) | R::Top => {
                    results.push((r, expr.span(), *flag))
                }
                _ => return false,
            }
        }
        let base = self.v(v).shape.clone();
        let mut survivors: SmallVec<[(Shape, bool); 4]> = SmallVec::new();
        // A failed alternative's message is needed only if none survives (then each failure
        // is reported): an atom that differs from the value's atom is noted as `Err` and
        // explained below, instead of formatting a conflict that is usually dropped.
        let mut failures: SmallVec<[Result<Conflict, (Atom, Span)>; 4]> = SmallVec::new();
        for (r, span, flag) in results {
            if let (R::Atom(atom), Some((old, _))) = (&r, &base.atom)
                && old != atom
            {
                failures.push(Err((atom.clone(), span)));
                continue;
            }
            let mut shape = base.clone();
            let applied = match r {
                R::Atom(atom) => shape.add_atom(atom, span),
                R::Kinds(kinds) => shape.add_kinds(kinds, span),
                R::Valid(validator) => shape.add_validator(validator, span),
                _ => Ok(()),
            }
            .and_then(|()| shape.check());
            match applied {
                Ok(()) => {
                    let same = survivors
                        .iter_mut()
                        .find(|(s, _)| match (&s.atom, &shape.atom) {
                            (Some((a, _)), Some((b, _))) => a == b,
                            (None, None) => s.constraint_text() == shape.constraint_text(),
                            _ => false,
                        });
                    match same {
                        Some(existing) => existing.1 |= flag,
                        None => survivors.push((shape, flag)),
                    }
                }
                Err(conflict) => failures.push(Ok(conflict)),
            }
        }
        self.settle_atomic(v, &base, survivors, failures);
        true
    }

    /// Settles a disjunction of atoms ([`Engine::atomic_disjunction`]): each failure reported
    /// when no alternative survived, the value's shape when one did, else one done vertex per
    /// alternative.
    fn settle_atomic(
        &mut self,
        v: VId,
        base: &Shape,
        mut survivors: SmallVec<[(Shape, bool); 4]>,
        failures: SmallVec<[Result<Conflict, (Atom, Span)>; 4]>,
    ) {
        match survivors.len() {
            0 => {
                let n = failures.len();
                for failure in failures {
                    let mut failure = match (failure, &base.atom) {
                        (Ok(conflict), _) => conflict,
                        (Err((atom, span)), Some((old, old_span))) => {
                            atom_conflict(old, *old_span, &atom, span)
                        }
                        // Noted only when the value has an atom.
                        (Err(_), None) => continue,
                    };
                    if n > 1 {
                        failure.message = format!("{} (in empty disjunction)", failure.message);
                    }
                    self.conflict(v, failure);
                }
            }
            1 => {
                if let Some((shape, _)) = survivors.pop() {
                    self.vm(v).shape = shape;
                }
            }
            _ => {
                let parent = self.v(v).parent;
                let label = self.v(v).label;
                let field = self.v(v).field;
                let span = self.v(v).span;
                let mut alts = Vec::with_capacity(survivors.len());
                for (shape, flag) in survivors {
                    let alt = self.new_vertex(parent, label);
                    let vertex = self.vm(alt);
                    vertex.shape = shape;
                    vertex.state = State::Done;
                    vertex.field = field;
                    vertex.span = span;
                    alts.push((alt, flag));
                }
                self.vm(v).alts = Some(alts);
            }
        }
    }

    /// A fresh vertex holding `v`'s conjuncts processed so far (not its disjunctions).
    fn clone_state(&mut self, v: VId) -> VId {
        // The copy starts without the pending disjunctions: set them aside instead of cloning
        // them only to clear the clone.
        let disjs = self.vm(v).take_disjs();
        let mut copy = if self.v(v).rare.as_ref().is_some_and(|r| r.is_empty()) {
            // Only the disjunctions were set aside: the copy needs no box of its own.
            let rare = self.vm(v).rare.take();
            let copy = self.v(v).clone();
            self.vm(v).rare = rare;
            copy
        } else {
            self.v(v).clone()
        };
        if !disjs.is_empty() {
            self.vm(v).rare_mut().disjs = disjs;
        }
        copy.origin = Some(self.v(v).origin.unwrap_or(v));
        copy.state = State::New;
        copy.cursor = copy.conjs.len();
        copy.depth = self.v(v).depth;
        // Children are copied unevaluated so the alternative can add to them.
        // The cloned arc and element vectors are reused, each entry replaced by its copy.
        let mut arcs = std::mem::take(&mut copy.arcs);
        let list = copy.list.take();
        // Pushed, not written over a placeholder vertex (built and dropped for nothing).
        let z = self.vs.len() as VId;
        self.vs.push(copy);
        for entry in &mut arcs {
            entry.1 = self.clone_unevaluated(entry.1, z);
        }
        self.vm(z).arcs = arcs;
        if let Some(mut list) = list {
            for elem in &mut list.elems {
                *elem = self.clone_unevaluated(*elem, z);
            }
            self.vm(z).list = Some(list);
        }
        z
    }

    fn clone_unevaluated(&mut self, v: VId, parent: VId) -> VId {
        let src = self.v(v);
        let label = src.label;
        let field = src.field;
        let docs = src.docs.clone();
        let span = src.span;
        let pos = src.pos;
        let from_comprehension = src.from_comprehension;
        let conjs: Conjs<'a> = src.conjs.iter().filter(|c| !c.derived).cloned().collect();
        let id = self.new_vertex(Some(parent), label);
        let vertex = self.vm(id);
        vertex.field = field;
        vertex.docs = docs;
        vertex.span = span;
        vertex.pos = pos;
        vertex.from_comprehension = from_comprehension;
        vertex.conjs = conjs;
        id
    }
}

/// Collects the leaves of a disjunction with whether each is marked default.
/// The alternatives of a disjunction expression with their default flags, and whether it has
/// a default at all, following the spec's rewrite rules for nested disjunctions: in a marked
/// disjunction (`*a | b`), a marked term keeps its own default if it has one and is its own
/// default otherwise (M1, M2), and an unmarked term loses its defaults (M0, M3); in an unmarked
/// one, terms keep their defaults (D0-D2). So `*1 | (*2 | 3)` defaults to 1 and
/// `*(*1 | 2) | 3` to 1.
fn disjunction_terms(expr: &Expr) -> (Terms<'_>, bool) {
    let mut terms = Terms::new();
    disjunction_chain(expr, &mut terms);
    let marked = terms.iter().any(|(_, m)| *m);
    let mut leaves = Terms::new();
    let mut has_default = marked;
    for (term, term_marked) in terms {
        let nested = match term {
            Expr::Paren(inner, _) if is_disjunction(inner) => inner.as_ref(),
            other if is_disjunction(other) => other,
            // A plain term is its own leaf, default exactly when marked in a marked chain
            // (what the nested case below gives for a one-leaf, unmarked disjunction).
            other => {
                leaves.push((other, marked && term_marked));
                continue;
            }
        };
        let (inner, inner_default) = disjunction_terms(nested);
        for (leaf, leaf_default) in inner {
            let is_default = match (marked, term_marked) {
                (true, true) => !inner_default || leaf_default,
                (true, false) => false,
                (false, _) => inner_default && leaf_default,
            };
            leaves.push((leaf, is_default));
        }
        has_default |= !marked && inner_default;
    }
    (leaves, has_default)
}

/// The terms of one syntactic disjunction `a | *b | c` (not looking into parentheses), each
/// with whether it is marked.
fn disjunction_chain<'a>(expr: &'a Expr, out: &mut Terms<'a>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::Disjunction,
            lhs,
            rhs,
            ..
        } => {
            disjunction_chain(lhs, out);
            disjunction_chain(rhs, out);
        }
        Expr::Unary {
            op: UnaryOp::Default,
            operand,
            ..
        } => out.push((operand, true)),
        other => out.push((other, false)),
    }
}

fn is_disjunction(expr: &Expr) -> bool {
    match expr {
        Expr::Binary {
            op: BinaryOp::Disjunction,
            ..
        }
        | Expr::Unary {
            op: UnaryOp::Default,
            ..
        } => true,
        Expr::Paren(inner, _) => is_disjunction(inner),
        _ => false,
    }
}

/// The alternatives of each of a vertex's disjunctions, as conjuncts with their default flags
/// (every alternative is a default when none is marked).
fn disjunction_sets<'a>(disjs: &[Conj<'a>]) -> SmallVec<[Alts<'a>; 1]> {
    // Alternatives of each disjunction: (conjunct kind, env, close, grp, default flag).
    let mut sets: SmallVec<[Alts<'a>; 1]> = SmallVec::new();
    for d in disjs {
        if let ConjKind::Or(items, span) = &d.kind {
            let alts = items
                .iter()
                .map(|item| {
                    (
                        Conj {
                            kind: ConjKind::Ref(*item, *span),
                            env: d.env,
                            close: d.close,
                            grp: d.grp,
                            derived: true,
                        },
                        true,
                    )
                })
                .collect();
            sets.push(alts);
            continue;
        }
        let ConjKind::Expr(expr) = d.kind else {
            continue;
        };
        let (leaves, has_default) = disjunction_terms(expr);
        let alts = leaves
            .into_iter()
            .map(|(e, is_default)| {
                (
                    Conj {
                        kind: ConjKind::Expr(e),
                        env: d.env,
                        close: d.close,
                        grp: d.grp,
                        derived: true,
                    },
                    !has_default || is_default,
                )
            })
            .collect();
        sets.push(alts);
    }
    sets
}
