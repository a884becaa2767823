//! Label symbols and the per-thread tables an evaluation takes over: the symbol table, the
//! symbols of AST labels and the values of literal constants ([`Symbols`]), the FxHash hasher
//! they use, and the engine's construction (taking the tables) and drop (handing them back).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use crate::eval::budget::{Budget, Meter};
use crate::eval::val::Atom;

use super::scope::{DECL_INDEX, Hops, MAX_DECL_INDEX};
use super::{Engine, FieldKind, MAX_VERTEX_CAPACITY_HINT, Sym, VERTEX_CAPACITY_HINT, Vertex};

/// Label symbols (text, index, list-index symbols), shared by the evaluations of one thread: the
/// same templates are evaluated over and over with the same labels, so an evaluation takes the
/// table over instead of allocating and hashing every label again, and hands it back when it
/// ends. A symbol's number is only used within one evaluation (results hold label text).
#[derive(Default)]
struct Symbols {
    syms: Vec<Rc<str>>,
    sym_index: HashMap<Rc<str>, Sym, FxBuild>,
    index_syms: Vec<Sym>,
    ast_syms: AstSyms,
    constants: Constants,
    hops: Hops,
}

/// The values of a file's constant string and number literals by (file identity, address of
/// the literal): every evaluation of a template reads the same literals, and each was parsed
/// (numbers) or copied into a shared string again per evaluation. Keyed like [`AstSyms`];
/// independent of the symbol table, but kept and reset with it.
pub(super) type Constants = HashMap<(u64, usize), Atom, FxBuild>;

/// Symbols of label text in a file's AST by (file identity, address, length): the same
/// template's labels are interned on every evaluation, and hashing three words is cheaper than
/// hashing and comparing the text. Only valid with the symbol table it was filled against, so
/// it travels with it in [`Symbols`]. The identity (`ast::CompileChecks`) is never shared by
/// another file, so an entry of a dropped file is never hit again, even if its memory is reused.
pub(super) type AstSyms = HashMap<(u64, usize, usize), Sym, FxBuild>;

thread_local! {
    static SYMBOLS: std::cell::RefCell<Symbols> = const {
        std::cell::RefCell::new(Symbols {
            syms: Vec::new(),
            sym_index: HashMap::with_hasher(FxBuild),
            index_syms: Vec::new(),
            ast_syms: HashMap::with_hasher(FxBuild),
            constants: HashMap::with_hasher(FxBuild),
            hops: HashMap::with_hasher(FxBuild),
        })
    };
}

/// Symbols kept per thread before the table starts over (data keys, such as label and env var
/// names of many apps, would otherwise accumulate in a long-running process).
const MAX_SHARED_SYMBOLS: usize = 1 << 16;

/// The empty label, interned first (labels of the root and of temporary vertices).
pub(super) const EMPTY_SYM: Sym = 0;

/// A small, fast, non-cryptographic hasher (FxHash) for the label interner: labels are not
/// attacker-controlled in a way that matters here, and SipHash dominated profiles.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxBuild;

#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher(u64);

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(K);
        }
    }

    fn write_usize(&mut self, i: usize) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(K);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Drop for Engine<'_> {
    /// Hands the symbol table back to the thread (see [`Symbols`]).
    fn drop(&mut self) {
        let (ast_syms, constants) = match self.ast_syms_saved.take() {
            // This evaluation's own tables (several files) are dropped; the thread's ones still
            // match the symbol table, as symbols are only appended.
            Some(saved) => saved,
            None => (
                std::mem::take(&mut self.ast_syms),
                std::mem::take(&mut self.constants),
            ),
        };
        let symbols = Symbols {
            syms: std::mem::take(&mut self.syms),
            sym_index: std::mem::take(&mut self.sym_index),
            index_syms: std::mem::take(&mut self.index_syms),
            ast_syms,
            constants,
            hops: std::mem::take(&mut self.hops),
        };
        // During thread teardown the table is simply dropped.
        let _ = SYMBOLS.try_with(|shared| *shared.borrow_mut() = symbols);
        let decl_index = std::mem::take(&mut self.decl_index);
        let _ = DECL_INDEX.try_with(|shared| *shared.borrow_mut() = decl_index);
    }
}

impl<'a> Engine<'a> {
    pub fn new(budget: Budget) -> Engine<'a> {
        // An evaluation nested in another on the same thread finds the table taken and starts
        // an empty one: correct, just not shared.
        let shared = SYMBOLS
            .try_with(|symbols| std::mem::take(&mut *symbols.borrow_mut()))
            .unwrap_or_default();
        let shared = if shared.syms.len() > MAX_SHARED_SYMBOLS
            || shared.ast_syms.len() > MAX_SHARED_SYMBOLS
            || shared.constants.len() > MAX_SHARED_SYMBOLS
            || shared.hops.len() > MAX_SHARED_SYMBOLS
        {
            Symbols::default()
        } else {
            shared
        };
        let mut decl_index = DECL_INDEX
            .try_with(|index| std::mem::take(&mut *index.borrow_mut()))
            .unwrap_or_default();
        if decl_index.len() > MAX_DECL_INDEX {
            decl_index.clear();
        }
        let mut engine = Engine {
            vs: Vec::with_capacity(1),
            envs: Vec::with_capacity(64),
            syms: shared.syms,
            sym_index: shared.sym_index,
            ast_syms: shared.ast_syms,
            constants: shared.constants,
            ast_uid: 0,
            ast_syms_saved: None,
            index_syms: shared.index_syms,
            lets: HashMap::with_hasher(FxBuild),
            alias_envs: HashMap::with_hasher(FxBuild),
            regexes: HashMap::new(),
            depth: 0,
            insert_at: None,
            ref_in_definition: false,
            legacy_list_arithmetic: false,
            omit_injected_data: false,
            schema_scope: None,
            schema_root_decls: None,
            file_uid: None,
            decl_index,
            hops: shared.hops,
            size_hint: &VERTEX_CAPACITY_HINT,
            meter: Meter::new(budget),
        };
        let root_label = engine.intern("");
        let mut root = Vertex::new(None, root_label, 0);
        root.field = FieldKind::Regular;
        engine.vs.push(root);
        engine
    }

    /// Sizes of the arenas, for profiling (`CUE_STATS=1`).
    pub fn stats(&self) -> String {
        let conjs: usize = self.vs.iter().map(|v| v.conjs.len()).sum();
        let alts = self.vs.iter().filter(|v| v.alts.is_some()).count();
        let forwards = self.vs.iter().filter(|v| v.forward.is_some()).count();
        format!(
            "vertices {} envs {} conjuncts {conjs} syms {} disjunctions {alts} forwarded {forwards} steps {}",
            self.vs.len(),
            self.envs.len(),
            self.syms.len(),
            self.meter.spent()
        )
    }

    #[inline]
    pub fn intern(&mut self, s: &str) -> Sym {
        if let Some(sym) = self.sym_index.get(s) {
            return *sym;
        }
        let rc: Rc<str> = Rc::from(s);
        let sym = self.syms.len() as Sym;
        self.syms.push(rc.clone());
        self.sym_index.insert(rc, sym);
        sym
    }

    /// [`Engine::intern`] for label text that lives in the AST (stable address for `'a`).
    #[inline]
    pub fn intern_ast(&mut self, s: &'a str) -> Sym {
        let key = (self.ast_uid, s.as_ptr() as usize, s.len());
        if let Some(sym) = self.ast_syms.get(&key) {
            return *sym;
        }
        let sym = self.intern(s);
        self.ast_syms.insert(key, sym);
        sym
    }

    /// The symbol of list index `i`.
    #[inline]
    pub(super) fn index_sym(&mut self, i: usize) -> Sym {
        while self.index_syms.len() <= i {
            let next = self.index_syms.len().to_string();
            let sym = self.intern(&next);
            self.index_syms.push(sym);
        }
        self.index_syms[i]
    }

    /// Remembers how many vertices this evaluation needed, so the next one allocates its arena
    /// once instead of growing (and copying) it several times.
    pub fn record_size(&self) {
        let needed = self.vs.len().min(MAX_VERTEX_CAPACITY_HINT);
        self.size_hint.fetch_max(needed, Ordering::Relaxed);
    }

    #[inline]
    pub fn sym(&self, sym: Sym) -> &str {
        self.syms.get(sym as usize).map_or("", |s| s)
    }

    /// [`Engine::sym`] as a shared string: for a label held across calls that borrow the
    /// engine mutably, without copying its text.
    #[inline]
    pub(super) fn sym_text(&self, sym: Sym) -> Rc<str> {
        self.syms
            .get(sym as usize)
            .cloned()
            .unwrap_or_else(|| Rc::from(""))
    }
}
