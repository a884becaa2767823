//! `encoding/json`, `encoding/base64` and `encoding/yaml`, and the concrete JSON of a vertex
//! that their marshalling functions read.

use std::rc::Rc;

use base64::Engine as _;

use crate::span::Span;
use crate::{Error, ErrorKind};

use super::{Args, err, string};
use crate::eval::engine::{Engine, FieldKind, R, VId, is_definition, is_hidden};
use crate::eval::val::Atom;

pub(super) fn json(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let span = a.span;
    let r = match name {
        "json.Marshal" => {
            a.arity(1)?;
            let (r, s) = a.values[0].clone();
            let v = a.engine.vertex_of(r, s)?;
            let j = vertex_json(a.engine, v, s, 0)?;
            string(serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        "json.MarshalStream" => {
            a.arity(1)?;
            let items = a.list(0)?;
            let mut out = String::new();
            for item in items {
                let j = vertex_json(a.engine, item, span, 0)?;
                out.push_str(&serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?);
                out.push('\n');
            }
            string(out)
        }
        "json.Unmarshal" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            R::V(a.engine.json_vertex(&j, span))
        }
        "json.Valid" => {
            a.arity(1)?;
            let s = a.str(0)?;
            R::Atom(Atom::Bool(
                serde_json::from_str::<serde_json::Value>(&s).is_ok(),
            ))
        }
        "json.Indent" => {
            a.arity(3)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            string(serde_json::to_string_pretty(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        "json.Compact" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value =
                serde_json::from_str(&s).map_err(|e| a.fail(format!("json: {e}")))?;
            string(serde_json::to_string(&j).map_err(|e| a.fail(e.to_string()))?)
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                span,
            ));
        }
    };
    Ok(r)
}

pub(super) fn base64(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let engine = base64::engine::general_purpose::STANDARD;
    let r = match name {
        "base64.Encode" => {
            a.arity(2)?;
            if a.atom(0)? != Atom::Null {
                return Err(a.fail("base64: unsupported encoding: cannot use value as null"));
            }
            let data: Vec<u8> = match a.atom(1)? {
                Atom::Str(s) => s.as_bytes().to_vec(),
                Atom::Bytes(b) => b.to_vec(),
                other => return Err(a.type_error(1, &other, "bytes")),
            };
            string(engine.encode(data))
        }
        "base64.Decode" => {
            a.arity(2)?;
            if a.atom(0)? != Atom::Null {
                return Err(a.fail("base64: unsupported encoding: cannot use value as null"));
            }
            let s = a.str(1)?;
            let data = engine
                .decode(s.as_bytes())
                .map_err(|e| a.fail(e.to_string()))?;
            R::Atom(Atom::Bytes(Rc::from(data.as_slice())))
        }
        "base64.EncodedLen" => {
            a.arity(2)?;
            let n = a.int(1)?;
            R::Atom(Atom::Int((n + 2) / 3 * 4))
        }
        "base64.DecodedLen" => {
            a.arity(2)?;
            let n = a.int(1)?;
            R::Atom(Atom::Int(n / 4 * 3))
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                a.span,
            ));
        }
    };
    Ok(r)
}

pub(super) fn yaml(a: &mut Args<'_, '_>) -> Result<R, Error> {
    let name = a.name;
    let span = a.span;
    let r = match name {
        "yaml.Marshal" => {
            a.arity(1)?;
            let (r, s) = a.values[0].clone();
            let v = a.engine.vertex_of(r, s)?;
            let j = vertex_json(a.engine, v, s, 0)?;
            string(yaml_text(&j).map_err(|e| a.fail(e))?)
        }
        "yaml.MarshalStream" => {
            a.arity(1)?;
            let items = a.list(0)?;
            let mut docs = Vec::new();
            for item in items {
                let j = vertex_json(a.engine, item, span, 0)?;
                docs.push(yaml_text(&j).map_err(|e| a.fail(e))?);
            }
            string(docs.join("---\n"))
        }
        "yaml.Unmarshal" => {
            a.arity(1)?;
            let s = a.str(0)?;
            let j: serde_json::Value = serde_saphyr::from_str_with_options(&s, yaml_options(&s))
                .map_err(|e| a.fail(format!("yaml: {e}")))?;
            R::V(a.engine.json_vertex(&j, span))
        }
        _ => {
            return Err(err(
                ErrorKind::Unsupported,
                format!("unsupported: {name}"),
                span,
            ));
        }
    };
    Ok(r)
}

fn yaml_text(j: &serde_json::Value) -> Result<String, String> {
    serde_saphyr::to_string(j).map_err(|e| e.to_string())
}

/// Concrete JSON of a vertex, defaults taken (for `json.Marshal` and friends).
pub fn vertex_json(
    engine: &mut Engine<'_>,
    v: VId,
    span: Span,
    depth: u32,
) -> Result<serde_json::Value, Error> {
    if depth > 100 {
        return Err(err(ErrorKind::Cycle, "structural cycle", span));
    }
    let v = engine.concrete_vertex(v, span)?;
    if let Some(e) = engine.vs[v as usize].errors.first() {
        return Err(e.clone());
    }
    if let Some(list) = engine.vs[v as usize].list.clone() {
        let mut out = Vec::with_capacity(list.elems.len());
        for elem in list.elems {
            out.push(vertex_json(engine, elem, span, depth + 1)?);
        }
        return Ok(serde_json::Value::Array(out));
    }
    let vertex = &engine.vs[v as usize];
    if vertex.is_struct
        || (vertex.struct_hint
            && vertex.shape.atom.is_none()
            && vertex.shape.kinds == crate::KindSet::TOP)
    {
        let arcs = engine.ordered_arcs(v);
        let mut map = serde_json::Map::new();
        for (sym, arc) in arcs {
            let label = engine.sym(sym).to_owned();
            if is_hidden(&label) || is_definition(&label) {
                continue;
            }
            match engine.vs[arc as usize].field {
                FieldKind::Optional => continue,
                FieldKind::Required | FieldKind::Regular => {}
            }
            engine.eval_vertex(arc);
            let value = vertex_json(engine, arc, span, depth + 1)?;
            map.insert(label, value);
        }
        return Ok(serde_json::Value::Object(map));
    }
    let atom = engine.concrete(R::V(v), span)?;
    engine.charge_copy(&atom);
    if let Some(error) = engine.budget_error() {
        return Err(error);
    }
    Ok(atom.to_json())
}

/// serde-saphyr's options for reading `text`: its defaults, except that a run of comment lines
/// of any length may sit where the parser looks ahead (between a key and its value, say).
/// serde-saphyr's default stops at 32 such comments with "too many buffered comments", where
/// go-yaml, and so KubeVela, reads the file; a comment is at least one byte, so the input's
/// length bounds the buffer.
pub fn yaml_options(text: &str) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_buffered_comment_events = budget.max_buffered_comment_events.max(text.len());
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}
