//! The reference as Markdown: the top-level keys, then one section per
//! table in the order the file type names them, each table's keys with
//! their type, default and doc comment; `[source]` and `[sink]` list
//! their connectors by `kind`.

use crate::model::{Default, Items, Key, Shape, Table};
use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::fmt::Write;
use syn::{Expr, GenericArgument, Lit, PathArguments, Type};

/// The type the whole file is read into.
const FILE_TYPE: &str = "PipelineFile";

/// Types whose rendering is not their fields (parsed by hand).
const SPECIAL: &[(&str, &str)] = &[
    (
        "SecretSource",
        "secret: `{ env = \"VAR\" }` or `{ file = \"PATH\" }`",
    ),
    ("ColumnType", "column type"),
    ("StartingOffsets", "`\"earliest\"`, `\"latest\"` or offsets"),
    ("Value", "any TOML value"),
];

/// How a key's type reads in the reference.
enum Described {
    Plain(String),
    /// A table of its own (a struct or a tagged enum), by type name.
    Table(String),
    /// An array of tables (`[[lookup]]`, `schema = [ { … } ]`).
    Tables(String),
    /// One of these strings.
    Choice(Vec<String>),
    /// `[source]`: a connector chosen by `kind`.
    Sources,
    /// `[sink]` or `[[sink]]`: connectors chosen by `kind`, with routing.
    Sinks,
}

struct Writer<'a> {
    items: &'a Items,
    out: String,
    /// Sections to write: (TOML path, type name).
    queue: VecDeque<(String, String)>,
    /// Types that have a section, by name, with the path it is under.
    placed: Vec<(String, String)>,
}

/// The whole reference.
pub fn reference(items: &Items) -> Result<String> {
    let mut w = Writer {
        items,
        out: String::new(),
        queue: VecDeque::new(),
        placed: Vec::new(),
    };
    let file = items
        .tables
        .get(FILE_TYPE)
        .with_context(|| format!("no `{FILE_TYPE}` type in the sources"))?;
    w.out += HEADER;
    w.out += "\n## Top level\n\n";
    w.paragraph(&file.doc);
    w.keys_table("", struct_keys(file)?)?;
    while let Some((path, type_name)) = w.queue.pop_front() {
        w.section(&path, &type_name)?;
    }
    Ok(w.out)
}

const HEADER: &str = "# Pipeline file reference

Every key of the pipeline file, table by table. This page is generated
from the code that reads the file — each table is a Rust type, its keys the
type's fields, their descriptions the fields' doc comments, their defaults
serde's — by `cargo run -p weir-docgen`; a test fails when it is stale.
For a whole file with examples and each feature explained, see
[pipelines.md](pipelines.md).

Relative paths are taken from the pipeline file's directory. Unknown keys
are errors, and every error names the key. Durations are written like
`\"500ms\"`, `\"10s\"` or `\"5m\"`; sizes like `\"512MiB\"` or `\"1GiB\"`.
";

impl<'a> Writer<'a> {
    fn paragraph(&mut self, text: &str) {
        if !text.is_empty() {
            self.out += text;
            self.out += "\n\n";
        }
    }

    /// The section of table `type_name` at `path`.
    fn section(&mut self, path: &str, type_name: &str) -> Result<()> {
        match type_name {
            "Sources" => return self.connectors(path, "source"),
            "Sinks" => return self.connectors(path, "sink"),
            _ => {}
        }
        let table = self.table(type_name)?;
        let _ = writeln!(self.out, "## `[{path}]`\n");
        self.paragraph(&table.doc);
        match &table.shape {
            Shape::Struct(keys) => self.keys_table(path, keys.iter().collect()),
            Shape::Enum { variants, tag } => {
                let tag = tag.as_deref().context("a table enum needs a tag")?;
                for v in variants {
                    let default = if v.is_default { " (the default)" } else { "" };
                    let _ = writeln!(self.out, "### `{tag} = \"{}\"`{default}\n", v.name);
                    self.paragraph(&v.doc);
                    if !v.keys.is_empty() {
                        self.keys_table(path, v.keys.iter().collect())?;
                    }
                }
                Ok(())
            }
        }
    }

    /// `[source]` or `[sink]`: each connector by `kind`.
    fn connectors(&mut self, path: &str, which: &str) -> Result<()> {
        let items = self.items;
        let list = match which {
            "source" => &items.sources,
            _ => &items.sinks,
        };
        let _ = writeln!(self.out, "## `[{path}]`\n");
        if which == "sink" {
            let routing = self.table("SinkRouting")?;
            self.paragraph(&routing.doc);
            self.keys_table(path, struct_keys(routing)?)?;
        }
        let kinds: Vec<String> = list.iter().map(|c| format!("`{}`", c.kind)).collect();
        let _ = writeln!(
            self.out,
            "`kind` chooses the connector: {}. Each takes the keys below.\n",
            kinds.join(", ")
        );
        for c in list {
            let table = self.table(&c.type_name)?;
            let _ = writeln!(self.out, "### `kind = \"{}\"`\n", c.kind);
            self.paragraph(&table.doc);
            let keys = struct_keys(table)?;
            if keys.is_empty() {
                self.out += "No other keys.\n\n";
            } else {
                self.keys_table(path, keys)?;
            }
        }
        Ok(())
    }

    /// The keys of a table at `path` (empty for the top level).
    fn keys_table(&mut self, path: &str, keys: Vec<&Key>) -> Result<()> {
        self.out += "| key | type | default | description |\n|---|---|---|---|\n";
        for key in keys {
            let described = self.describe(&key.ty, key.duration);
            let full = match path {
                "" => key.name.clone(),
                p => format!("{p}.{}", key.name),
            };
            let ty = self.type_text(&described, &full);
            let default = self.default_text(key, &described)?;
            let _ = writeln!(
                self.out,
                "| `{}` | {ty} | {default} | {} |",
                key.name,
                cell(&key.doc)
            );
        }
        self.out += "\n";
        Ok(())
    }

    /// The type column, queueing the section a table type needs.
    fn type_text(&mut self, described: &Described, path: &str) -> String {
        match described {
            Described::Plain(text) => text.clone(),
            Described::Choice(values) => values
                .iter()
                .map(|v| format!("`\"{v}\"`"))
                .collect::<Vec<_>>()
                .join(" \\| "),
            Described::Table(name) => format!("table, {}", self.link(path, name)),
            Described::Tables(name) => format!("array of tables, {}", self.link(path, name)),
            Described::Sources => format!("table, {}", self.link(path, "Sources")),
            Described::Sinks => format!("table or array of tables, {}", self.link(path, "Sinks")),
        }
    }

    /// A link to the section of `type_name`, placed at `path` the first
    /// time a key names it.
    fn link(&mut self, path: &str, type_name: &str) -> String {
        let at = match self.placed.iter().find(|(t, _)| t == type_name) {
            Some((_, at)) => at.clone(),
            None => {
                self.placed.push((type_name.to_string(), path.to_string()));
                self.queue
                    .push_back((path.to_string(), type_name.to_string()));
                path.to_string()
            }
        };
        format!("see [`[{at}]`](#{})", slug(&format!("`[{at}]`")))
    }

    fn table(&self, name: &str) -> Result<&'a Table> {
        let items: &'a Items = self.items;
        items
            .tables
            .get(name)
            .with_context(|| format!("no `{name}` type in the sources"))
    }

    /// How `ty` reads.
    fn describe(&self, ty: &Type, duration: bool) -> Described {
        if duration {
            return Described::Plain("duration".into());
        }
        let Type::Path(p) = ty else {
            return Described::Plain(quote::quote!(#ty).to_string());
        };
        let Some(last) = p.path.segments.last() else {
            return Described::Plain(String::new());
        };
        let name = last.ident.to_string();
        let args = generic_types(&last.arguments);
        match (name.as_str(), args.as_slice()) {
            ("Option", [inner]) => self.describe(inner, false),
            ("Vec", [inner]) => match self.describe(inner, false) {
                Described::Table(t) => Described::Tables(t),
                Described::Plain(text) => Described::Plain(format!("array of {text}")),
                Described::Choice(values) => Described::Plain(format!(
                    "array of {}",
                    values
                        .iter()
                        .map(|v| format!("`\"{v}\"`"))
                        .collect::<Vec<_>>()
                        .join(" \\| ")
                )),
                other => other,
            },
            ("BTreeMap" | "HashMap", [_, value]) => match self.describe(value, false) {
                Described::Plain(text) => Described::Plain(format!("table of {text}")),
                _ => Described::Plain("table".into()),
            },
            ("String", _) => Described::Plain("string".into()),
            ("PathBuf" | "Path", _) => Described::Plain("path".into()),
            ("bool", _) => Described::Plain("boolean".into()),
            ("u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64", _) => {
                Described::Plain("integer".into())
            }
            ("f32" | "f64", _) => Described::Plain("number".into()),
            ("Duration", _) => Described::Plain("duration".into()),
            ("SourceConfig", _) => Described::Sources,
            ("Sinks", _) => Described::Sinks,
            _ => {
                if let Some((_, text)) = SPECIAL.iter().find(|(n, _)| *n == name) {
                    return Described::Plain((*text).to_string());
                }
                match self.items.tables.get(&name).map(|t| &t.shape) {
                    Some(Shape::Enum {
                        variants,
                        tag: None,
                    }) if variants.iter().all(|v| v.keys.is_empty()) => {
                        Described::Choice(variants.iter().map(|v| v.name.clone()).collect())
                    }
                    Some(_) => Described::Table(name),
                    None => Described::Plain(format!("`{name}`")),
                }
            }
        }
    }

    /// The default column.
    fn default_text(&self, key: &Key, described: &Described) -> Result<String> {
        let optional = is_option(&key.ty);
        Ok(match &key.default {
            Default::Required if optional => "—".into(),
            Default::Required => "**required**".into(),
            Default::Implied if optional => "—".into(),
            Default::Implied => match described {
                Described::Plain(t) if t == "boolean" => "`false`".into(),
                Described::Plain(t) if t == "integer" => "`0`".into(),
                Described::Plain(t) if t == "duration" => "`\"0s\"`".into(),
                Described::Plain(t) if t.starts_with("array") => "`[]`".into(),
                Described::Plain(t) if t.starts_with("table") => "`{}`".into(),
                Described::Tables(_) => "none".into(),
                Described::Choice(values) => {
                    let default = self.default_variant(&key.ty).or(values.first().cloned());
                    default.map_or_else(String::new, |v| format!("`\"{v}\"`"))
                }
                Described::Table(_) => "see the table".into(),
                _ => "see description".into(),
            },
            Default::Function(name) => {
                let expr = self
                    .items
                    .functions
                    .get(&(key.file, name.clone()))
                    .with_context(|| format!("no default fn `{name}` beside its field"))?;
                Evaluator { items: self.items }
                    .value(expr, key.duration)
                    .unwrap_or_else(|| "see description".into())
            }
        })
    }

    /// The `#[default]` variant of the enum `ty` names.
    fn default_variant(&self, ty: &Type) -> Option<String> {
        let Type::Path(p) = ty else { return None };
        let name = p.path.segments.last()?.ident.to_string();
        match &self.items.tables.get(&name)?.shape {
            Shape::Enum { variants, .. } => variants
                .iter()
                .find(|v| v.is_default)
                .map(|v| v.name.clone()),
            Shape::Struct(_) => None,
        }
    }
}

/// A struct table's keys.
fn struct_keys(table: &Table) -> Result<Vec<&Key>> {
    match &table.shape {
        Shape::Struct(keys) => Ok(keys.iter().collect()),
        Shape::Enum { .. } => bail!("expected a struct"),
    }
}

fn is_option(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Option"))
}

fn generic_types(args: &PathArguments) -> Vec<Type> {
    match args {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A default's value as the file would write it, for the expressions
/// defaults are made of: literals, strings, durations, integer
/// arithmetic, constants and fields of a type's `Default`.
struct Evaluator<'a> {
    items: &'a Items,
}

impl Evaluator<'_> {
    fn value(&self, expr: &Expr, duration: bool) -> Option<String> {
        let expr = self.resolve(expr, 0)?;
        if duration {
            return self.duration(&expr);
        }
        if let Some(n) = self.integer(&expr) {
            return Some(format!("`{n}`"));
        }
        match &expr {
            Expr::Lit(l) => match &l.lit {
                Lit::Str(s) => Some(format!("`\"{}\"`", s.value())),
                Lit::Bool(b) => Some(format!("`{}`", b.value)),
                Lit::Float(f) => Some(format!("`{}`", f.base10_digits())),
                _ => None,
            },
            Expr::MethodCall(m)
                if ["into", "to_string", "to_owned"].contains(&&*m.method.to_string()) =>
            {
                self.value(&m.receiver, false)
            }
            _ => None,
        }
    }

    /// `expr` with constants and `T::default().field` replaced by their
    /// expressions (a few levels deep).
    fn resolve(&self, expr: &Expr, depth: u8) -> Option<Expr> {
        if depth > 8 {
            return None;
        }
        match expr {
            Expr::Paren(p) => self.resolve(&p.expr, depth + 1),
            Expr::Path(p) if p.path.segments.len() <= 2 => {
                let name = p.path.segments.last()?.ident.to_string();
                match self.items.consts.get(&name) {
                    Some(value) => self.resolve(value, depth + 1),
                    None => Some(expr.clone()),
                }
            }
            Expr::Field(f) => {
                let Expr::Call(call) = &*f.base else {
                    return None;
                };
                let Expr::Path(func) = &*call.func else {
                    return None;
                };
                let segments = &func.path.segments;
                if segments.len() != 2 || segments[1].ident != "default" {
                    return None;
                }
                let body = self.items.defaults.get(&segments[0].ident.to_string())?;
                let Expr::Struct(literal) = body else {
                    return None;
                };
                let syn::Member::Named(member) = &f.member else {
                    return None;
                };
                let field = literal
                    .fields
                    .iter()
                    .find(|fv| matches!(&fv.member, syn::Member::Named(n) if n == member))?;
                self.resolve(&field.expr, depth + 1)
            }
            _ => Some(expr.clone()),
        }
    }

    /// `Duration::from_secs(n)` and friends as `"ns"`.
    fn duration(&self, expr: &Expr) -> Option<String> {
        let Expr::Call(call) = expr else { return None };
        let Expr::Path(f) = &*call.func else {
            return None;
        };
        let unit = match f.path.segments.last()?.ident.to_string().as_str() {
            "from_secs" => "s",
            "from_millis" => "ms",
            "from_micros" => "us",
            _ => return None,
        };
        let n = self.integer(call.args.first()?)?;
        let text = match (unit, n) {
            ("s", n) if n >= 60 && n % 60 == 0 => format!("{}m", n / 60),
            _ => format!("{n}{unit}"),
        };
        Some(format!("`\"{text}\"`"))
    }

    /// An integer literal or arithmetic of them (`64 << 20`).
    fn integer(&self, expr: &Expr) -> Option<u128> {
        match &self.resolve(expr, 0)? {
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => i.base10_parse().ok(),
                _ => None,
            },
            Expr::Binary(b) => {
                let (l, r) = (self.integer(&b.left)?, self.integer(&b.right)?);
                match b.op {
                    syn::BinOp::Shl(_) => l.checked_shl(u32::try_from(r).ok()?),
                    syn::BinOp::Mul(_) => l.checked_mul(r),
                    syn::BinOp::Add(_) => l.checked_add(r),
                    syn::BinOp::Sub(_) => l.checked_sub(r),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// A doc comment as one table cell.
fn cell(doc: &str) -> String {
    doc.split('\n')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .replace("  ", " ")
        .replace('|', "\\|")
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_read_as_the_file_writes_them() {
        let e = |s: &str| syn::parse_str::<Expr>(s).unwrap();
        let mut items = Items::default();
        items.consts.insert("LIMIT".into(), e("5"));
        items.defaults.insert(
            "Limits".into(),
            e("Limits { wait: Duration::from_secs(120), memory: 512 << 20 }"),
        );
        let ev = Evaluator { items: &items };
        assert_eq!(ev.value(&e("100"), false).as_deref(), Some("`100`"));
        assert_eq!(ev.value(&e("LIMIT"), false).as_deref(), Some("`5`"));
        assert_eq!(
            ev.value(&e("64 << 20"), false).as_deref(),
            Some("`67108864`")
        );
        assert_eq!(
            ev.value(&e("\"512MiB\".into()"), false).as_deref(),
            Some("`\"512MiB\"`")
        );
        assert_eq!(
            ev.value(&e("Duration::from_secs(10)"), true).as_deref(),
            Some("`\"10s\"`")
        );
        assert_eq!(
            ev.value(&e("Limits::default().wait"), true).as_deref(),
            Some("`\"2m\"`")
        );
        assert_eq!(
            ev.value(&e("Limits::default().memory"), false).as_deref(),
            Some("`536870912`")
        );
        assert_eq!(ev.value(&e("Other::default().x"), true), None);
    }

    #[test]
    fn anchors_are_githubs() {
        assert_eq!(slug("`[source.tls]`"), "sourcetls");
        assert_eq!(slug("`kind = \"kafka\"`"), "kind--kafka");
    }
}
