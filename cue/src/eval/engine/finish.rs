//! Finishing a vertex once its conjuncts are processed (list lengths and element types,
//! composite validators), and the walks over finished values (collecting errors, comparing
//! two values).

use smallvec::SmallVec;

use crate::eval::val::{Atom, Validator};
use crate::span::Span;
use crate::{Error, ErrorKind};

use super::{Engine, FieldKind, Group, MAX_TREE_DEPTH, VId, is_definition, is_hidden};

impl<'a> Engine<'a> {
    pub(super) fn finish(&mut self, v: VId) {
        // List element types and lengths.
        if let Some(list) = &self.v(v).list {
            let n_elems = list.elems.len();
            if let Some((len, span)) = list.closed_len
                && n_elems > len
            {
                let error = self.err(
                    v,
                    ErrorKind::Conflict,
                    format!("incompatible list lengths ({len} and {n_elems})"),
                    vec![span],
                );
                self.add_error(v, error);
            }
            // Element types (`[...T]`) apply to every element; most lists have none, and
            // then nothing is copied.
            if let Some(list) = self.v(v).list.as_ref().filter(|l| !l.types.is_empty()) {
                let (elems, types) = (list.elems.clone(), list.types.clone());
                for elem in elems {
                    for ty in &types {
                        self.add_conj(elem, ty.kind.clone(), ty.env, ty.close, 0, false);
                    }
                }
            }
        }
        // Closedness.
        if self.v(v).groups().iter().any(|g| g.closed && !g.ellipsis) {
            let groups: SmallVec<[Group; 1]> = self.v(v).groups().iter().cloned().collect();
            let deep_group = self.v(v).deep_group() as usize;
            let arcs = self.v(v).arcs.clone();
            for (sym, arc) in arcs {
                let label = self.sym_text(sym);
                if is_hidden(&label) || is_definition(&label) {
                    continue;
                }
                let allows = |engine: &Self, group: &Group| {
                    group.labels.contains(&sym)
                        || group.patterns.iter().any(|p| {
                            let matcher = engine.v(v).patterns().get(*p).map(|p| p.matcher.clone());
                            matcher.is_some_and(|m| engine.pattern_matches(&m, &label))
                        })
                };
                for (index, group) in groups.iter().enumerate() {
                    if !group.closed || group.ellipsis {
                        continue;
                    }
                    let allowed = allows(self, group)
                        || (index + 1 == deep_group
                            && groups.iter().any(|other| {
                                other.in_definition
                                    && other.closed
                                    && !other.ellipsis
                                    && allows(self, other)
                            }));
                    if !allowed {
                        let span = self.v(arc).decl_span.unwrap_or(self.v(arc).span);
                        let error =
                            self.err(arc, ErrorKind::Closed, "field not allowed", vec![span]);
                        self.add_error(arc, error);
                        break;
                    }
                }
            }
        }
        if let Err(conflict) = self.v(v).shape.check() {
            self.conflict(v, conflict);
        }
        self.check_composite_validators(v);
    }

    /// Runs the validators that apply to a list or struct (`list.MaxItems(3)`,
    /// `struct.MinFields(1)`): [`Shape::check`] only sees scalars.
    fn check_composite_validators(&mut self, v: VId) {
        if self.v(v).shape.validators.is_empty() {
            return;
        }
        let validators: Vec<(Validator, Span)> = self
            .v(v)
            .shape
            .validators
            .iter()
            .filter(|(validator, _)| {
                matches!(validator, Validator::Builtin(name, _)
                    if name.starts_with("list.") || name.starts_with("struct."))
            })
            .cloned()
            .collect();
        for (validator, span) in validators {
            let Validator::Builtin(name, args) = &validator else {
                continue;
            };
            let bound = match args.first() {
                Some(Atom::Int(n)) => Some(*n),
                _ => None,
            };
            let failure = match (*name, bound) {
                ("list.MinItems" | "list.MaxItems", Some(n)) => {
                    let Some(list) = &self.v(v).list else {
                        continue;
                    };
                    let len = i64::try_from(list.elems.len()).unwrap_or(i64::MAX);
                    if *name == "list.MinItems" && len < n {
                        Some(format!("len(list) < MinItems({n}) ({len} < {n})"))
                    } else if *name == "list.MaxItems" && len > n {
                        Some(format!("len(list) > MaxItems({n}) ({len} > {n})"))
                    } else {
                        None
                    }
                }
                ("list.UniqueItems", None) => {
                    let Some(list) = &self.v(v).list else {
                        continue;
                    };
                    let elems = list.elems.clone();
                    let mut duplicate = None;
                    'outer: for (i, a) in elems.iter().enumerate() {
                        for (j, b) in elems.iter().enumerate().skip(i + 1) {
                            if self.same_value(*a, *b, 0) {
                                duplicate = Some((i, j));
                                break 'outer;
                            }
                        }
                    }
                    duplicate.map(|(i, j)| format!("equal values at position {i} and {j}"))
                }
                ("struct.MinFields" | "struct.MaxFields", Some(n)) => {
                    if !self.v(v).is_struct {
                        continue;
                    }
                    let count = self
                        .v(v)
                        .arcs
                        .iter()
                        .filter(|(sym, arc)| {
                            let label = self.sym(*sym);
                            self.v(*arc).field != FieldKind::Optional
                                && !is_hidden(label)
                                && !is_definition(label)
                        })
                        .count();
                    let count = i64::try_from(count).unwrap_or(i64::MAX);
                    if *name == "struct.MinFields" && count < n {
                        Some(format!("len(fields) < MinFields({n}) ({count} < {n})"))
                    } else if *name == "struct.MaxFields" && count > n {
                        Some(format!("len(fields) > MaxFields({n}) ({count} > {n})"))
                    } else {
                        None
                    }
                }
                _ => {
                    let message = format!("unsupported: validator {}", validator.text());
                    let error = self.err(v, ErrorKind::Unsupported, message, vec![span]);
                    self.add_error(v, error);
                    continue;
                }
            };
            if let Some(reason) = failure {
                let message = format!(
                    "invalid value (does not satisfy {}): {reason}",
                    validator.text()
                );
                let error = self.err(v, ErrorKind::Conflict, message, vec![span]);
                self.add_error(v, error);
            }
        }
    }

    /// Errors in `v` and below (evaluating everything): a disjunct with any error, including a
    /// failed reference, is eliminated (cycles excepted: they may resolve later).
    pub fn deep_errors(&mut self, v: VId, depth: u32) -> Vec<Error> {
        self.eval_vertex(v);
        let v = self.deref(v);
        let mut errors: Vec<Error> = self
            .v(v)
            .errors
            .iter()
            .filter(|e| e.kind != ErrorKind::Cycle)
            .cloned()
            .collect();
        self.meter
            .charge(errors.iter().map(super::arena::error_steps).sum());
        if depth > MAX_TREE_DEPTH || !errors.is_empty() {
            return errors;
        }
        if self.v(v).alts.is_some() {
            return errors;
        }
        // Optional fields are not descended into: nothing fills them, and recursive
        // definitions (`#L: {next?: #L}`) would never end.
        let children: Vec<VId> = self
            .v(v)
            .arcs
            .iter()
            .map(|(_, a)| *a)
            .filter(|a| self.v(*a).field != FieldKind::Optional)
            .chain(self.v(v).list.iter().flat_map(|l| l.elems.iter().copied()))
            .collect();
        for child in children {
            errors.extend(self.deep_errors(child, depth + 1));
            if !errors.is_empty() {
                break;
            }
        }
        errors
    }

    /// Structural equality of two evaluated values (for merging equal disjuncts).
    pub(super) fn same_value(&mut self, a: VId, b: VId, depth: u32) -> bool {
        if depth > 20 {
            return false;
        }
        self.eval_vertex(a);
        self.eval_vertex(b);
        let (a, b) = (self.deref(a), self.deref(b));
        if a == b {
            return true;
        }
        let (va, vb) = (self.v(a), self.v(b));
        if va.alts.is_some() || vb.alts.is_some() {
            return false;
        }
        if va.is_struct != vb.is_struct || va.list.is_some() != vb.list.is_some() {
            return false;
        }
        match (&va.shape.atom, &vb.shape.atom) {
            (Some((x, _)), Some((y, _))) => return x == y,
            (None, None) => {}
            _ => return false,
        }
        if va.shape.kinds != vb.shape.kinds
            || va.shape.validators.len() != vb.shape.validators.len()
            || !va
                .shape
                .validators
                .iter()
                .zip(&vb.shape.validators)
                .all(|((x, _), (y, _))| x == y)
        {
            return false;
        }
        if let (Some(la), Some(lb)) = (&va.list, &vb.list) {
            if la.elems.len() != lb.elems.len()
                || la.closed_len.map(|c| c.0) != lb.closed_len.map(|c| c.0)
            {
                return false;
            }
            let pairs: Vec<(VId, VId)> = la
                .elems
                .iter()
                .copied()
                .zip(lb.elems.iter().copied())
                .collect();
            return pairs
                .into_iter()
                .all(|(x, y)| self.same_value(x, y, depth + 1));
        }
        if va.arcs.len() != vb.arcs.len() {
            return false;
        }
        let arcs_a = va.arcs.clone();
        let arcs_b = vb.arcs.clone();
        for (sym, x) in arcs_a {
            let Some((_, y)) = arcs_b.iter().find(|(s, _)| *s == sym) else {
                return false;
            };
            if self.v(x).field != self.v(*y).field || !self.same_value(x, *y, depth + 1) {
                return false;
            }
        }
        true
    }
}
