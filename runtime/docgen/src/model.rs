//! What the sources say about the pipeline file's types: each struct and
//! enum with its doc comment and serde attributes, each field's key, type,
//! default and doc, the `fn`s that serde defaults name, and the connectors
//! by `KIND`.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use syn::{Attribute, Expr, Fields, Item, Lit, Meta, Type};

/// A table of the file: a struct, or an enum (string values or tagged).
pub struct Table {
    pub doc: String,
    pub shape: Shape,
}

/// What a type is made of.
pub enum Shape {
    Struct(Vec<Key>),
    /// Variants; `tag` is the key that selects one (`mode = "…"`).
    Enum {
        variants: Vec<Variant>,
        tag: Option<String>,
    },
}

/// One enum variant as the file spells it.
pub struct Variant {
    pub name: String,
    pub doc: String,
    pub keys: Vec<Key>,
    pub is_default: bool,
}

/// One key of a table.
pub struct Key {
    pub name: String,
    pub doc: String,
    pub ty: Type,
    pub default: Default,
    /// Parsed as a duration (`"10s"`) whatever the Rust type says.
    pub duration: bool,
    /// The file it is declared in (default functions are looked up there
    /// first).
    pub file: usize,
}

/// What a key is when the file leaves it out.
pub enum Default {
    /// Required.
    Required,
    /// The type's `Default`.
    Implied,
    /// What the named `fn` returns.
    Function(String),
}

/// One connector: its `kind` and settings type.
pub struct Connector {
    pub kind: String,
    pub type_name: String,
}

/// Everything read.
#[derive(Default)]
pub struct Items {
    pub tables: BTreeMap<String, Table>,
    /// Functions of one expression, by file and name (serde defaults).
    pub functions: BTreeMap<(usize, String), Expr>,
    /// Constants (free and associated), by name.
    pub consts: BTreeMap<String, Expr>,
    /// `impl Default for T`'s body, by `T`.
    pub defaults: BTreeMap<String, Expr>,
    /// Files read so far.
    files: usize,
    pub sources: Vec<Connector>,
    pub sinks: Vec<Connector>,
}

impl Items {
    /// Reads every `.rs` file under `dir`.
    pub fn read_dir(&mut self, dir: &Path) -> Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            if path.is_dir() {
                self.read_dir(&path)?;
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                let file = syn::parse_file(&text)
                    .with_context(|| format!("parsing {}", path.display()))?;
                self.files += 1;
                self.read_items(&file.items);
            }
        }
        Ok(())
    }

    fn read_items(&mut self, items: &[Item]) {
        for item in items {
            match item {
                Item::Struct(s) if derives_deserialize(&s.attrs) => {
                    let keys = keys(&s.fields, &s.attrs, self.files);
                    let table = Table {
                        doc: doc(&s.attrs),
                        shape: Shape::Struct(keys),
                    };
                    self.tables.insert(s.ident.to_string(), table);
                }
                Item::Enum(e) if derives_deserialize(&e.attrs) => {
                    let rename_all = serde_value(&e.attrs, "rename_all");
                    let variants = e
                        .variants
                        .iter()
                        .map(|v| Variant {
                            name: serde_value(&v.attrs, "rename").unwrap_or_else(|| {
                                renamed(&v.ident.to_string(), rename_all.as_deref())
                            }),
                            doc: doc(&v.attrs),
                            keys: keys(&v.fields, &[], self.files),
                            is_default: v.attrs.iter().any(|a| a.path().is_ident("default")),
                        })
                        .collect();
                    let table = Table {
                        doc: doc(&e.attrs),
                        shape: Shape::Enum {
                            variants,
                            tag: serde_value(&e.attrs, "tag"),
                        },
                    };
                    self.tables.insert(e.ident.to_string(), table);
                }
                Item::Fn(f) => {
                    if let Some(expr) = only_expr(&f.block) {
                        let key = (self.files, f.sig.ident.to_string());
                        self.functions.insert(key, expr.clone());
                    }
                }
                Item::Const(c) => {
                    self.consts.insert(c.ident.to_string(), (*c.expr).clone());
                }
                Item::Impl(i) => self.read_impl(i),
                Item::Mod(m) => {
                    if let Some((_, items)) = &m.content {
                        self.read_items(items);
                    }
                }
                _ => {}
            }
        }
    }

    /// Associated constants, `impl Default for T`, and `impl
    /// SourceConnector for T { const KIND: &str = "…"; }` (or sink).
    fn read_impl(&mut self, i: &syn::ItemImpl) {
        for item in &i.items {
            if let syn::ImplItem::Const(c) = item {
                self.consts.insert(c.ident.to_string(), c.expr.clone());
            }
        }
        let Some((_, trait_path, _)) = &i.trait_ else {
            return;
        };
        let self_name = match &*i.self_ty {
            Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        if trait_path.is_ident("Default") {
            let body = i.items.iter().find_map(|item| match item {
                syn::ImplItem::Fn(f) => only_expr(&f.block),
                _ => None,
            });
            if let (Some(name), Some(body)) = (self_name, body) {
                self.defaults.insert(name, body.clone());
            }
            return;
        }
        let Some(last) = trait_path.segments.last() else {
            return;
        };
        let list = match last.ident.to_string().as_str() {
            "SourceConnector" => &mut self.sources,
            "SinkConnector" => &mut self.sinks,
            _ => return,
        };
        let Type::Path(self_ty) = &*i.self_ty else {
            return;
        };
        let Some(type_name) = self_ty.path.segments.last().map(|s| s.ident.to_string()) else {
            return;
        };
        for item in &i.items {
            if let syn::ImplItem::Const(c) = item {
                if c.ident == "KIND" {
                    if let Some(kind) = string_literal(&c.expr) {
                        list.push(Connector {
                            kind,
                            type_name: type_name.clone(),
                        });
                    }
                }
            }
        }
    }
}

/// A struct's or variant's keys: fields serde reads, renamed as serde
/// renames them.
fn keys(fields: &Fields, container: &[Attribute], file: usize) -> Vec<Key> {
    let rename_all = serde_value(container, "rename_all");
    let all_default = has_serde_word(container, "default");
    fields
        .iter()
        .filter(|f| {
            !has_serde_word(&f.attrs, "skip") && !has_serde_word(&f.attrs, "skip_deserializing")
        })
        .filter_map(|f| {
            let ident = f.ident.as_ref()?.to_string();
            let name = serde_value(&f.attrs, "rename")
                .unwrap_or_else(|| renamed(&ident, rename_all.as_deref()));
            let default = match serde_value(&f.attrs, "default") {
                Some(function) => Default::Function(function),
                None if has_serde_word(&f.attrs, "default") || all_default => Default::Implied,
                None => Default::Required,
            };
            let with = serde_value(&f.attrs, "with").unwrap_or_default();
            Some(Key {
                name,
                doc: doc(&f.attrs),
                ty: f.ty.clone(),
                default,
                duration: with.contains("duration") || with.contains("humantime"),
                file,
            })
        })
        .collect()
}

/// A field or variant name as serde's `rename_all` spells it.
fn renamed(ident: &str, rule: Option<&str>) -> String {
    let words = split_words(ident);
    match rule {
        Some("kebab-case") => words.join("-"),
        Some("lowercase") => ident.to_lowercase(),
        Some("snake_case") => words.join("_"),
        _ => ident.to_string(),
    }
}

/// `CamelCase` or `snake_case` into lowercase words.
fn split_words(ident: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for part in ident.split('_').filter(|p| !p.is_empty()) {
        let mut word = String::new();
        for c in part.chars() {
            if c.is_uppercase() && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.extend(c.to_lowercase());
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words
}

/// The doc comment, lines joined with newlines, without the leading space.
fn doc(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => string_literal(&nv.value),
            _ => None,
        })
        .map(|l| l.strip_prefix(' ').unwrap_or(&l).to_string())
        .collect();
    lines.join("\n").trim().to_string()
}

fn derives_deserialize(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("derive")
            && a.meta.require_list().is_ok_and(|l| {
                l.tokens
                    .to_string()
                    .split(',')
                    .any(|t| t.trim().ends_with("Deserialize"))
            })
    })
}

/// The nested metas of `#[serde(...)]` attributes.
fn serde_metas(attrs: &[Attribute]) -> Vec<Meta> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("serde"))
        .filter_map(|a| {
            a.parse_args_with(syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .collect()
}

/// `#[serde(name = "value")]`'s value.
fn serde_value(attrs: &[Attribute], name: &str) -> Option<String> {
    serde_metas(attrs).into_iter().find_map(|m| match m {
        Meta::NameValue(nv) if nv.path.is_ident(name) => string_literal(&nv.value),
        _ => None,
    })
}

/// Whether `#[serde(word)]` is present.
fn has_serde_word(attrs: &[Attribute], word: &str) -> bool {
    serde_metas(attrs)
        .iter()
        .any(|m| matches!(m, Meta::Path(p) if p.is_ident(word)))
}

/// The one expression a block consists of.
fn only_expr(block: &syn::Block) -> Option<&Expr> {
    match block.stmts.as_slice() {
        [syn::Stmt::Expr(expr, None)] => Some(expr),
        _ => None,
    }
}

/// The text of a string literal expression.
pub fn string_literal(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}
