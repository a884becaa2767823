//! Rendered objects as compact JSON text ([`PackedObjects`]): the form the analysis cache keeps
//! them in, and the agent's render with it (as `serde_json::Value` trees, every map,
//! key and string its own allocation, the objects of 10,000 apps were ~170 MB; as text, a few
//! times less).
//!
//! The forms are the cache's business: outside this crate an app's render is read through
//! [`AppRender`], whether it is a [`RenderedApp`] (values) or a [`CachedApp`] (packed, shared
//! with the cache).
//!
//! An app is packed once, when it is analysed ([`crate::check`]): a reused app keeps its packed
//! objects (shared by `Arc` with the cache), and readers parse one app's objects when they need
//! them as values ([`ObjectsForm::values`]). Packing is exact: text parses back to the same
//! value, in the same key order. An object it could not promise that for (a non-integer number,
//! which serde_json parses back to the nearest float only, or nesting deeper than serde_json's
//! parser takes) stays a value.

use std::borrow::Cow;

use serde_json::Value;

use std::sync::Arc;

use crate::{AppInputs, AppRef, Diagnostic, RenderedApp, RenderedObject, Severity};

/// The form of an app's rendered objects in a [`RenderedApp`]: JSON values
/// (`Vec<RenderedObject>`, what the renderer and the rules make) or compact JSON text
/// ([`PackedObjects`], what the analysis cache holds).
pub(crate) trait ObjectsForm:
    Clone + std::fmt::Debug + Default + PartialEq + Send + Sync + 'static
{
    /// The objects in render order, as values: borrowed when they are values, parsed when
    /// packed.
    fn values(&self) -> Cow<'_, [RenderedObject]>;
    /// The objects as values, without a copy when they are values.
    fn into_values(self) -> Vec<RenderedObject>;
    /// The objects of a render in this form.
    fn from_values(objects: Vec<RenderedObject>) -> Self;
    /// The number of objects.
    fn len(&self) -> usize;
    /// True when there is no object (a broken app has none).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drops every object (an app blocked by a diagnostic renders none).
    fn clear(&mut self);
    /// Each object's `apiVersion` and `kind`, where both are strings: read from the text
    /// without building the object when packed (a live plan looks up the scope of every kind
    /// before planning the first group).
    fn kinds(&self) -> Vec<(String, String)>;
}

/// The `apiVersion` and `kind` of an object, as [`ObjectsForm::kinds`] gives them.
fn kind_of(object: &Value) -> Option<(String, String)> {
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
    Some((text("apiVersion")?, text("kind")?))
}

impl ObjectsForm for Vec<RenderedObject> {
    fn values(&self) -> Cow<'_, [RenderedObject]> {
        Cow::Borrowed(self)
    }
    fn into_values(self) -> Vec<RenderedObject> {
        self
    }
    fn from_values(objects: Vec<RenderedObject>) -> Self {
        objects
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn clear(&mut self) {
        Vec::clear(self);
    }
    fn kinds(&self) -> Vec<(String, String)> {
        self.iter()
            .filter_map(|object| kind_of(&object.object))
            .collect()
    }
}

/// An app's rendered objects as compact JSON text, in render order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PackedObjects(Box<[PackedObject]>);

/// One rendered object as compact JSON text, with where it came from (as in
/// [`RenderedObject`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PackedObject {
    pub(crate) component: String,
    pub(crate) trait_type: Option<String>,
    pub(crate) output_name: Option<String>,
    json: Json,
}

/// The object: text, or (rarely) the value itself when text could not give it back exactly.
/// Equal values pack to the same variant and, as the renderer keeps key order, the same text.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Text(Box<str>),
    Value(Box<Value>),
}

/// Nesting serde_json's parser takes is 128; text is kept for objects well within it.
const MAX_PACKED_DEPTH: usize = 100;

impl PackedObject {
    /// `object` as compact JSON text (or as a value, when text would not give it back exactly).
    pub(crate) fn pack(object: RenderedObject) -> PackedObject {
        let RenderedObject {
            component,
            trait_type,
            output_name,
            object,
        } = object;
        let json = if exact_as_text(&object, 0) {
            // Serialising a `Value` cannot fail: its map keys are strings.
            Json::Text(
                serde_json::to_string(&object)
                    .expect("a JSON value serialises")
                    .into_boxed_str(),
            )
        } else {
            Json::Value(Box::new(object))
        };
        PackedObject {
            component,
            trait_type,
            output_name,
            json,
        }
    }

    /// The object as a value (parsed from its text).
    pub(crate) fn value(&self) -> Value {
        match &self.json {
            // The text is serde_json's own serialisation of a value within the parser's nesting
            // limit (`exact_as_text`), so it parses.
            Json::Text(text) => serde_json::from_str(text).expect("packed JSON parses back"),
            Json::Value(value) => Value::clone(value),
        }
    }

    /// The object as compact JSON text, when it is kept as text.
    #[cfg(test)]
    pub(crate) fn text(&self) -> Option<&str> {
        match &self.json {
            Json::Text(text) => Some(text),
            Json::Value(_) => None,
        }
    }

    /// The object's `apiVersion` and `kind`, where both are strings (other fields are skipped,
    /// not built).
    pub(crate) fn kind(&self) -> Option<(String, String)> {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(rename = "apiVersion", borrow)]
            api_version: Option<Cow<'a, str>>,
            #[serde(borrow)]
            kind: Option<Cow<'a, str>>,
        }
        match &self.json {
            Json::Text(text) => {
                // Not strings: then the object has no kind to look up, as for a value.
                let head: Head<'_> = serde_json::from_str(text).ok()?;
                Some((head.api_version?.into_owned(), head.kind?.into_owned()))
            }
            Json::Value(value) => kind_of(value),
        }
    }

    /// The object with its value.
    pub(crate) fn unpack(&self) -> RenderedObject {
        RenderedObject {
            component: self.component.clone(),
            trait_type: self.trait_type.clone(),
            output_name: self.output_name.clone(),
            object: self.value(),
        }
    }
}

/// True when `value`'s compact text parses back to `value` itself: no non-integer number
/// (parsed back to the nearest float only, without serde_json's `float_roundtrip`) and no
/// nesting near the parser's limit.
fn exact_as_text(value: &Value, depth: usize) -> bool {
    match value {
        Value::Number(number) => !number.is_f64(),
        Value::Array(items) => {
            depth < MAX_PACKED_DEPTH && items.iter().all(|item| exact_as_text(item, depth + 1))
        }
        Value::Object(map) => {
            depth < MAX_PACKED_DEPTH && map.values().all(|item| exact_as_text(item, depth + 1))
        }
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

impl PackedObjects {
    /// The objects, each packed.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, PackedObject> {
        self.0.iter()
    }
}

impl ObjectsForm for PackedObjects {
    fn values(&self) -> Cow<'_, [RenderedObject]> {
        Cow::Owned(self.0.iter().map(PackedObject::unpack).collect())
    }
    fn into_values(self) -> Vec<RenderedObject> {
        self.values().into_owned()
    }
    fn from_values(objects: Vec<RenderedObject>) -> Self {
        PackedObjects(objects.into_iter().map(PackedObject::pack).collect())
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn clear(&mut self) {
        self.0 = Box::default();
    }
    fn kinds(&self) -> Vec<(String, String)> {
        self.0.iter().filter_map(PackedObject::kind).collect()
    }
}

/// A rendered app with its objects as compact JSON text: what the analysis cache keeps and
/// shares ([`crate::SharedOutput`]).
pub(crate) type PackedApp = RenderedApp<PackedObjects>;

/// Converts a rendered app between the forms of its objects.
pub(crate) trait ConvertForm {
    /// The app with its objects in the form `P`.
    fn into_form<P: ObjectsForm>(self) -> RenderedApp<P>;
    /// A copy of the app with its objects as values.
    fn to_values(&self) -> RenderedApp;
}

impl<O: ObjectsForm> ConvertForm for RenderedApp<O> {
    fn into_form<P: ObjectsForm>(self) -> RenderedApp<P> {
        RenderedApp {
            app: self.app,
            file: self.file,
            objects: P::from_values(self.objects.into_values()),
            diagnostics: self.diagnostics,
            input_hash: self.input_hash,
            inputs: self.inputs,
        }
    }

    fn to_values(&self) -> RenderedApp {
        RenderedApp {
            app: self.app.clone(),
            file: self.file,
            objects: self.objects.values().into_owned(),
            diagnostics: self.diagnostics.clone(),
            input_hash: self.input_hash.clone(),
            inputs: self.inputs.clone(),
        }
    }
}

/// A rendered app as the agent and the planner read it, whatever form its objects are kept in
/// and however it is held: a [`RenderedApp`] (objects as values, the CLI's) or a
/// [`CachedApp`] (packed, shared with the analysis cache: the agent's).
pub trait AppRender: Sync {
    /// The app's identity.
    fn app(&self) -> &AppRef;
    /// Errors and warnings for this app. Any error blocks the app.
    fn diagnostics(&self) -> &[Diagnostic];
    /// The digest of the app's inputs ([`RenderedApp::input_hash`]).
    fn input_hash(&self) -> &str;
    /// What a plan reads of the manifest besides the objects ([`RenderedApp::inputs`]).
    fn inputs(&self) -> &AppInputs;
    /// True when any diagnostic is an error (then the app has no object).
    fn is_blocked(&self) -> bool {
        (self.diagnostics().iter()).any(|diagnostic| diagnostic.severity == Severity::Error)
    }
    /// The number of rendered objects.
    fn object_count(&self) -> usize;
    /// The objects in render order, as values: borrowed when they are values, parsed (one
    /// app's at a time) when packed.
    fn objects(&self) -> Cow<'_, [RenderedObject]>;
    /// Each object's `apiVersion` and `kind`, where both are strings: read from the text
    /// without building the object when packed (a live plan looks up the scope of every kind
    /// before planning the first group).
    fn object_kinds(&self) -> Vec<(String, String)>;
}

impl AppRender for RenderedApp {
    fn app(&self) -> &AppRef {
        &self.app
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
    fn input_hash(&self) -> &str {
        &self.input_hash
    }
    fn inputs(&self) -> &AppInputs {
        &self.inputs
    }
    fn object_count(&self) -> usize {
        self.objects.len()
    }
    fn objects(&self) -> Cow<'_, [RenderedObject]> {
        self.objects.values()
    }
    fn object_kinds(&self) -> Vec<(String, String)> {
        self.objects.kinds()
    }
}

/// One app's render as the analysis cache keeps it and shares it with its output (by `Arc`:
/// an app the cache reused is the same allocation as last time): its objects are compact JSON
/// text, read through [`AppRender`]. Cloning copies a pointer.
#[derive(Debug, Clone)]
pub struct CachedApp(Arc<PackedApp>);

impl CachedApp {
    /// A render packed as the cache keeps it.
    pub fn pack(rendered: RenderedApp) -> CachedApp {
        CachedApp(Arc::new(rendered.into_form()))
    }

    /// True when `other` renders the same as this app in everything a deploy acts on: the
    /// same input hash, both blocked or neither, and the same objects. O(1) when both are
    /// one render shared with the cache.
    pub fn same_render(&self, other: &CachedApp) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.input_hash == other.0.input_hash
                && self.0.is_blocked() == other.0.is_blocked()
                && self.0.objects == other.0.objects)
    }

    /// The app as the cache holds it.
    pub(crate) fn shared(app: &Arc<PackedApp>) -> CachedApp {
        CachedApp(Arc::clone(app))
    }
}

impl AppRender for CachedApp {
    fn app(&self) -> &AppRef {
        &self.0.app
    }
    fn diagnostics(&self) -> &[Diagnostic] {
        &self.0.diagnostics
    }
    fn input_hash(&self) -> &str {
        &self.0.input_hash
    }
    fn inputs(&self) -> &AppInputs {
        &self.0.inputs
    }
    fn object_count(&self) -> usize {
        self.0.objects.len()
    }
    fn objects(&self) -> Cow<'_, [RenderedObject]> {
        self.0.objects.values()
    }
    fn object_kinds(&self) -> Vec<(String, String)> {
        self.0.objects.kinds()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> RenderedObject {
        RenderedObject {
            component: "web".to_owned(),
            trait_type: Some("gateway".to_owned()),
            output_name: Some("service".to_owned()),
            object: value,
        }
    }

    #[test]
    fn packing_gives_back_the_same_objects_in_the_same_key_order() {
        let objects = vec![
            object(json!({
                "kind": "Deployment",
                "apiVersion": "apps/v1",
                "metadata": {"name": "a\"b\\c\u{e9}\n", "labels": {"z": "1", "a": "2"}},
                "spec": {"replicas": 0, "min": -3, "big": u64::MAX, "list": [null, true, {}, []]},
            })),
            object(json!({"kind": "ConfigMap", "data": {}})),
        ];
        let packed = PackedObjects::from_values(objects.clone());
        assert!(packed.iter().all(|object| object.text().is_some()));
        let back = packed.values().into_owned();
        assert_eq!(back, objects);
        // Same key order, not only equal maps (`IndexMap` equality ignores order).
        for (back, object) in back.iter().zip(&objects) {
            assert_eq!(back.object.to_string(), object.object.to_string());
        }
        assert_eq!(
            packed.iter().next().and_then(PackedObject::text),
            Some(objects[0].object.to_string().as_str())
        );
    }

    #[test]
    fn floats_and_deep_nesting_stay_values() {
        let mut deep = json!(1);
        for _ in 0..(MAX_PACKED_DEPTH + 30) {
            deep = json!([deep]);
        }
        let float = json!({"spec": {"ratio": 0.1, "third": 1.0 / 3.0, "whole": 5.0}});
        let objects = vec![object(deep), object(float), object(json!({"n": 1}))];
        let packed = PackedObjects::from_values(objects.clone());
        let texts: Vec<bool> = packed.iter().map(|o| o.text().is_some()).collect();
        assert_eq!(texts, [false, false, true]);
        assert_eq!(packed.values().into_owned(), objects);
    }

    #[test]
    fn kinds_are_read_from_the_text_as_from_the_values() {
        let objects = vec![
            object(
                json!({"metadata": {"name": "x", "kind": "Nested"}, "kind": "Service", "apiVersion": "v1"}),
            ),
            object(
                json!({"apiVersion": "apps/v1", "kind": "Deploy\u{e9}ment\"", "spec": {"f": 0.5}}),
            ),
            object(json!({"apiVersion": "v1", "kind": 3})),
            object(json!({"kind": "NoVersion"})),
            object(json!({"apiVersion": "x/v1", "kind": "Esc\u{0041}ped\n"})),
        ];
        let packed = PackedObjects::from_values(objects.clone());
        assert_eq!(packed.kinds(), objects.kinds());
        assert_eq!(
            packed.kinds(),
            [
                ("v1".to_owned(), "Service".to_owned()),
                ("apps/v1".to_owned(), "Deploy\u{e9}ment\"".to_owned()),
                ("x/v1".to_owned(), "EscAped\n".to_owned()),
            ]
        );
    }

    #[test]
    fn a_packed_app_compares_by_its_objects() {
        let a = PackedObjects::from_values(vec![object(json!({"kind": "A", "n": 1}))]);
        let same = PackedObjects::from_values(vec![object(json!({"kind": "A", "n": 1}))]);
        let other = PackedObjects::from_values(vec![object(json!({"kind": "A", "n": 2}))]);
        assert_eq!(a, same);
        assert_ne!(a, other);
        let mut cleared = a.clone();
        cleared.clear();
        assert!(cleared.is_empty() && !a.is_empty());
    }
}
