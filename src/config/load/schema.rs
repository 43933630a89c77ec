//! `tableq schema`: a JSON Schema of the queue file, derived from the serde types
//! that read it ([`crate::config::load::raw::RawQueue`] and the tables under it), so that an
//! editor (taplo, Even Better TOML) validates and completes queue files with the
//! very keys the loader takes. The doc comments of those types are the schema's
//! descriptions; `[action]`'s are the kinds' own, from the registry of kinds the
//! action layer hands in ([`Kinds`]). What the schema cannot say (a select's columns, a command that
//! exists) the loader and `tableq check` still say.

use schemars::generate::SchemaSettings;
use schemars::transform::{transform_subschemas, Transform};
use schemars::Schema;

use crate::config::action::Kinds;
use crate::config::load::raw::RawQueue;

/// The file `tableq schema` writes in the repository, which the shipped examples
/// name in their `#:schema` line (a test keeps it current).
pub const SCHEMA_FILE: &str = "tableq.schema.json";

/// The queue file's schema, as pretty-printed JSON (draft 7, which taplo reads),
/// with the kinds of `[action]` that `A` reads.
pub(crate) fn queue_file_schema<A: Kinds>() -> String {
    let generator = SchemaSettings::draft07()
        .with_transform(NoNull)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<RawQueue<A>>();
    schema.insert("title".into(), "tableq queue file".into());
    schema.insert(
        "description".into(),
        "One queue: a SELECT whose rows are waiting, the action to run on each, and the SQL \
         that takes a row out of the select. See queues.example.toml and the README."
            .into(),
    );
    name_the_kinds(&mut schema, A::NAMES);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The `action` key's description, with the `type`s there are.
fn name_the_kinds(schema: &mut Schema, kinds: &[&str]) {
    let quoted: Vec<String> = kinds.iter().map(|kind| format!("\"{kind}\"")).collect();
    let list = match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => return,
    };
    let description = format!("What to do with one item: type = {list}.");
    let action = schema
        .get_mut("properties")
        .and_then(|properties| properties.get_mut("action"))
        .and_then(serde_json::Value::as_object_mut);
    if let Some(action) = action {
        action.insert("description".into(), description.into());
    }
}

/// What the value of the dotted `key` (`workers`, `action.timeout`) must look like,
/// in the queue file's words, read from the schema of a queue file whose `[action]`
/// `A` reads: `None` for a key it does not have.
pub(crate) fn expected_value<A: Kinds>(key: &str) -> Option<String> {
    let schema: serde_json::Value = serde_json::from_str(&queue_file_schema::<A>()).ok()?;
    let mut node = &schema;
    for segment in key.split('.') {
        node = property(&schema, node, segment)?;
    }
    let node = resolved(&schema, node);
    let key = key.rsplit('.').next().unwrap_or(key);
    let example = node
        .get("examples")
        .and_then(|e| e.get(0))
        .and_then(serde_json::Value::as_str);
    Some(
        match (
            node.get("type").and_then(serde_json::Value::as_str),
            example,
        ) {
            (Some("integer"), _) => format!("a whole number, such as `{key} = 4`"),
            (Some("boolean"), _) => format!("`true` or `false`, such as `{key} = true`"),
            (Some("array"), _) => format!("a list in brackets, such as `{key} = [\"…\"]`"),
            (Some("string"), Some(example)) => {
                format!("a quoted string, such as `{key} = \"{example}\"`")
            }
            (Some("string"), None) => format!("a quoted string, such as `{key} = \"…\"`"),
            _ => return None,
        },
    )
}

/// The schema of `name` under `node`, through `$ref` and `allOf`/`anyOf`/`oneOf`.
fn property<'a>(
    root: &'a serde_json::Value,
    node: &'a serde_json::Value,
    name: &str,
) -> Option<&'a serde_json::Value> {
    let node = resolved(root, node);
    if let Some(found) = node.get("properties").and_then(|p| p.get(name)) {
        return Some(found);
    }
    ["allOf", "anyOf", "oneOf"]
        .iter()
        .filter_map(|k| node.get(*k).and_then(serde_json::Value::as_array))
        .flatten()
        .find_map(|option| property(root, option, name))
}

/// `node`, or what its `$ref` (or a lone `allOf` entry) points at.
fn resolved<'a>(root: &'a serde_json::Value, node: &'a serde_json::Value) -> &'a serde_json::Value {
    let target = node
        .get("$ref")
        .and_then(serde_json::Value::as_str)
        .or_else(
            || match node.get("allOf").and_then(serde_json::Value::as_array) {
                Some(only) if only.len() == 1 => {
                    only[0].get("$ref").and_then(serde_json::Value::as_str)
                }
                _ => None,
            },
        );
    target
        .and_then(|r| r.strip_prefix("#"))
        .and_then(|pointer| root.pointer(pointer))
        .map(|found| resolved(root, found))
        .unwrap_or(node)
}

/// TOML has no null: an optional key is one that is left out, not one that may be
/// null, so `"type": ["string", "null"]` becomes `"type": "string"`, and a default
/// of null (a key whose default tableq works out) is no default.
#[derive(Clone)]
struct NoNull;

impl Transform for NoNull {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(serde_json::Value::Array(types)) = schema.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                let only = only.clone();
                schema.insert("type".into(), only);
            }
        }
        if schema
            .get("default")
            .is_some_and(serde_json::Value::is_null)
        {
            schema.remove("default");
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(serde_json::Value::Array(options)) = schema.get_mut(key) {
                options.retain(|o| o.get("type").is_none_or(|t| t != "null"));
            }
        }
        transform_subschemas(self, schema);
    }
}
