//! An object container file's blocks, checked before arrow-avro reads
//! them. Its reader trusts each block's record count: a block holding
//! bytes past its count of records (a count corrupted smaller, or zero)
//! makes it loop forever without reading on, a snappy block under 4 bytes
//! makes it panic, and a small deflate block may inflate without bound.
//! Here each block is decompressed (up to [`MAX_BLOCK`] bytes) and its
//! records are walked by the writer schema — lengths, counts and union
//! branches only, no values built — so that a file whose every block holds
//! exactly its count of records is all that reaches the reader; any other
//! is refused naming the block.

use anyhow::{bail, Context, Result};
use arrow_avro::compression::CompressionCodec;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read as _;

/// The most bytes one block may decompress to. Writers keep blocks near
/// 64 KiB (Avro's default sync interval); 64 MiB leaves a wide margin.
pub const MAX_BLOCK: usize = 64 << 20;

/// How deep values may nest (records in records, arrays of arrays): a
/// recursive schema lets the data choose the depth.
const MAX_DEPTH: usize = 64;

/// Records beyond the bytes left that a block may claim: records of a
/// zero-width schema (only `null` fields) take no bytes each.
const MAX_EMPTY_RECORDS: u64 = 1 << 16;

/// Checks every block of the file `data` whose header (`header_len`
/// bytes, ending in `sync`) names `codec` and the writer schema `writer`.
pub fn check(
    data: &[u8],
    header_len: usize,
    sync: [u8; 16],
    codec: Option<CompressionCodec>,
    writer: &Value,
) -> Result<()> {
    let shapes = Shapes::of(writer).context("the writer schema")?;
    let mut cursor = Cursor::new(data.get(header_len..).unwrap_or_default());
    let mut block = 0usize;
    while !cursor.is_empty() {
        block += 1;
        check_block(&mut cursor, sync, codec, &shapes)
            .with_context(|| format!("block {block} of the file"))?;
    }
    Ok(())
}

/// One block: its count, its size, its bytes (decompressed), its records
/// filling them exactly, then the sync marker.
fn check_block(
    cursor: &mut Cursor<'_>,
    sync: [u8; 16],
    codec: Option<CompressionCodec>,
    shapes: &Shapes,
) -> Result<()> {
    let count = cursor.count()? as u64;
    let size = cursor.count()?;
    let stored = cursor.take(size)?;
    if cursor.take(16)? != sync {
        bail!("its sync marker is not the file's");
    }
    let bytes = decompress(stored, codec)?;
    let mut records = Cursor::new(&bytes);
    if count > records.remaining() as u64 + MAX_EMPTY_RECORDS {
        bail!("it claims {count} records in {} bytes", records.remaining());
    }
    for n in 0..count {
        records.skip(shapes, shapes.root, 0).with_context(|| {
            format!("record {} of its {count} is cut short or malformed", n + 1)
        })?;
    }
    if !records.is_empty() {
        bail!(
            "it holds {} bytes after its {count} records: its record count is wrong",
            records.remaining()
        );
    }
    Ok(())
}

/// A block's bytes as its records are written, at most [`MAX_BLOCK`].
fn decompress(
    stored: &[u8],
    codec: Option<CompressionCodec>,
) -> Result<std::borrow::Cow<'_, [u8]>> {
    let limited = |reader: &mut dyn std::io::Read| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        reader
            .take(MAX_BLOCK as u64 + 1)
            .read_to_end(&mut out)
            .context("it does not decompress")?;
        if out.len() > MAX_BLOCK {
            bail!("it decompresses to more than {} MiB", MAX_BLOCK >> 20);
        }
        Ok(out)
    };
    match codec {
        None => Ok(stored.into()),
        Some(CompressionCodec::Deflate) => {
            Ok(limited(&mut flate2::read::DeflateDecoder::new(stored))?.into())
        }
        Some(CompressionCodec::Snappy) => {
            // The compressed bytes, then the CRC-32 of the uncompressed.
            let Some(body) = stored.len().checked_sub(4).map(|n| &stored[..n]) else {
                bail!("a snappy block needs at least its 4-byte checksum");
            };
            let len = snap::raw::decompress_len(body).context("it is not snappy")?;
            if len > MAX_BLOCK {
                bail!("it decompresses to more than {} MiB", MAX_BLOCK >> 20);
            }
            Ok(snap::raw::Decoder::new()
                .decompress_vec(body)
                .context("it is not snappy")?
                .into())
        }
        Some(other) => bail!("codec {other:?} is not read by this build"),
    }
}

/// What a value of a writer type takes in the binary encoding.
#[derive(Debug, Clone)]
enum Shape {
    Null,
    Boolean,
    /// `int` and `long`: a zig-zag varint.
    Varint,
    Float,
    Double,
    /// `bytes` and `string`: a length, then that many bytes.
    Bytes,
    Fixed(usize),
    /// The number of symbols.
    Enum(u64),
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<usize>),
}

/// A writer schema compiled to shapes, named types by index (a record may
/// refer to itself).
struct Shapes {
    shapes: Vec<Shape>,
    names: HashMap<String, usize>,
    root: usize,
}

impl Shapes {
    fn of(schema: &Value) -> Result<Shapes> {
        let mut s = Shapes {
            shapes: Vec::new(),
            names: HashMap::new(),
            root: 0,
        };
        s.root = s.compile(schema, None, 0)?;
        Ok(s)
    }

    fn push(&mut self, shape: Shape) -> usize {
        self.shapes.push(shape);
        self.shapes.len() - 1
    }

    fn compile(&mut self, t: &Value, namespace: Option<&str>, depth: usize) -> Result<usize> {
        if depth > MAX_DEPTH {
            bail!("types nest more than {MAX_DEPTH} deep");
        }
        match t {
            Value::String(name) => self.named(name, namespace),
            Value::Array(members) => {
                let members = members
                    .iter()
                    .map(|m| self.compile(m, namespace, depth + 1))
                    .collect::<Result<_>>()?;
                Ok(self.push(Shape::Union(members)))
            }
            Value::Object(o) => {
                let kind = o.get("type").context("a type without `type`")?;
                let Some(kind) = kind.as_str() else {
                    return self.compile(kind, namespace, depth + 1);
                };
                match kind {
                    "record" | "error" => self.record(t, namespace, depth),
                    "enum" => {
                        let symbols = o
                            .get("symbols")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                        let at = self.push(Shape::Enum(symbols as u64));
                        self.define(t, namespace, at)?;
                        Ok(at)
                    }
                    "fixed" => {
                        let size = o
                            .get("size")
                            .and_then(Value::as_u64)
                            .context("a fixed without `size`")?;
                        let at = self.push(Shape::Fixed(usize::try_from(size)?));
                        self.define(t, namespace, at)?;
                        Ok(at)
                    }
                    "array" => {
                        let items = o.get("items").context("an array without `items`")?;
                        let items = self.compile(items, namespace, depth + 1)?;
                        Ok(self.push(Shape::Array(items)))
                    }
                    "map" => {
                        let values = o.get("values").context("a map without `values`")?;
                        let values = self.compile(values, namespace, depth + 1)?;
                        Ok(self.push(Shape::Map(values)))
                    }
                    primitive => self.named(primitive, namespace),
                }
            }
            other => bail!("{other} is not an Avro type"),
        }
    }

    /// A record: named before its fields, which may refer to it.
    fn record(&mut self, t: &Value, namespace: Option<&str>, depth: usize) -> Result<usize> {
        let at = self.push(Shape::Record(Vec::new()));
        let full = self.define(t, namespace, at)?;
        let inner = full.rsplit_once('.').map(|(ns, _)| ns.to_string());
        let fields = t
            .get("fields")
            .and_then(Value::as_array)
            .context("a record without `fields`")?;
        let mut shapes = Vec::with_capacity(fields.len());
        for f in fields {
            let ty = f.get("type").context("a field without `type`")?;
            shapes.push(self.compile(ty, inner.as_deref(), depth + 1)?);
        }
        self.shapes[at] = Shape::Record(shapes);
        Ok(at)
    }

    /// Registers the named type `t` at `at`; its full name.
    fn define(&mut self, t: &Value, namespace: Option<&str>, at: usize) -> Result<String> {
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .context("a named type without `name`")?;
        let ns = t.get("namespace").and_then(Value::as_str).or(namespace);
        let full = match (name.contains('.'), ns) {
            (false, Some(ns)) if !ns.is_empty() => format!("{ns}.{name}"),
            _ => name.to_string(),
        };
        self.names.insert(full.clone(), at);
        Ok(full)
    }

    /// A primitive, or a named type defined before.
    fn named(&mut self, name: &str, namespace: Option<&str>) -> Result<usize> {
        let primitive = match name {
            "null" => Some(Shape::Null),
            "boolean" => Some(Shape::Boolean),
            "int" | "long" => Some(Shape::Varint),
            "float" => Some(Shape::Float),
            "double" => Some(Shape::Double),
            "bytes" | "string" => Some(Shape::Bytes),
            _ => None,
        };
        if let Some(shape) = primitive {
            return Ok(self.push(shape));
        }
        let qualified = namespace.map(|ns| format!("{ns}.{name}"));
        qualified
            .and_then(|q| self.names.get(&q))
            .or_else(|| self.names.get(name))
            .copied()
            .with_context(|| format!("`{name}` names no type defined before it"))
    }
}

/// Reads the binary encoding.
struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn remaining(&self) -> usize {
        self.data.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.data.len() {
            bail!("{n} bytes are called for, {} are left", self.data.len());
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// A zig-zag varint (`int` or `long`).
    fn long(&mut self) -> Result<i64> {
        let mut value = 0u64;
        for i in 0..10 {
            let byte = *self.take(1)?.first().unwrap_or(&0);
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        bail!("a varint longer than 10 bytes")
    }

    /// A non-negative count or length.
    fn count(&mut self) -> Result<usize> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| anyhow::anyhow!("a negative count or length ({n})"))
    }

    fn skip(&mut self, shapes: &Shapes, at: usize, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            bail!("values nest more than {MAX_DEPTH} deep");
        }
        match &shapes.shapes[at] {
            Shape::Null => {}
            Shape::Boolean => {
                self.take(1)?;
            }
            Shape::Varint => {
                self.long()?;
            }
            Shape::Float => {
                self.take(4)?;
            }
            Shape::Double => {
                self.take(8)?;
            }
            Shape::Bytes => {
                let n = self.count()?;
                self.take(n)?;
            }
            Shape::Fixed(n) => {
                self.take(*n)?;
            }
            Shape::Enum(symbols) => {
                let i = self.long()?;
                if !(0..*symbols as i64).contains(&i) {
                    bail!("enum symbol {i} of {symbols}");
                }
            }
            Shape::Union(members) => {
                let i = self.long()?;
                let member = usize::try_from(i)
                    .ok()
                    .and_then(|i| members.get(i))
                    .with_context(|| format!("union branch {i} of {}", members.len()))?;
                self.skip(shapes, *member, depth + 1)?;
            }
            Shape::Record(fields) => {
                for f in fields {
                    self.skip(shapes, *f, depth + 1)?;
                }
            }
            Shape::Array(items) => self.items(shapes, *items, None, depth)?,
            Shape::Map(values) => self.items(shapes, *values, Some(()), depth)?,
        }
        Ok(())
    }

    /// An array's or a map's blocks of items (a map's with string keys).
    fn items(
        &mut self,
        shapes: &Shapes,
        item: usize,
        keys: Option<()>,
        depth: usize,
    ) -> Result<()> {
        loop {
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                // A negative count is followed by the block's size in bytes.
                self.count()?;
            }
            let count = count.unsigned_abs();
            if count > self.remaining() as u64 {
                bail!("{count} items in {} bytes", self.remaining());
            }
            for _ in 0..count {
                if keys.is_some() {
                    let n = self.count()?;
                    self.take(n)?;
                }
                self.skip(shapes, item, depth + 1)?;
            }
        }
    }
}

#[cfg(test)]
mod tests;
