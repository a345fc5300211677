//! Input columns copied straight from Arrow buffers into guest memory.
//!
//! The generated bindings return a column as owned `Vec`s, so a column
//! used to cross the sandbox as two copies: Arrow buffer → host `Vec` →
//! guest memory (plus a host allocation per buffer). The `pipeline`
//! bench measured the two copies at most of what Wasm costs over native
//! code for cheap rules. Here the same WIT `column` record is lowered
//! from the Arrow buffers themselves (shared, reference-counted), so each
//! buffer is copied once, by wasmtime, into memory the guest allocated.
//!
//! [`add_to_linker`] replaces the generated `batch.column` and
//! `batch.take` imports with these; the WIT types, and so every guest in
//! every language, are unchanged.

use super::bindings::weir::operator::types as wit;
use super::bindings::InputBatch;
use super::store::HostState;
use anyhow::{bail, Context as _, Result};
use arrow_array::{Array, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_schema::DataType;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext,
};
use wasmtime::component::{ComponentType, Linker, Lower, Resource};
use wasmtime::StoreContextMut;

/// A WIT `list<T>` lowered from an Arrow buffer of `T`s without a host copy.
pub struct BufferList<T> {
    buffer: Buffer,
    _type: PhantomData<T>,
}

impl<T: ArrowNativeType> BufferList<T> {
    fn new(buffer: Buffer) -> Self {
        BufferList {
            buffer,
            _type: PhantomData,
        }
    }

    fn from_vec(values: Vec<T>) -> Self {
        Self::new(Buffer::from_vec(values))
    }

    fn as_slice(&self) -> &[T] {
        self.buffer.typed_data::<T>()
    }
}

// SAFETY: the same ABI, type check and lowering as `[T]` (what wasmtime's
// own `Vec<T>` and `Arc<[T]>` forward to), applied to the buffer's values.
#[allow(unsafe_code)] // wasmtime's traits for lowering are `unsafe` to implement
unsafe impl<T: ComponentType> ComponentType for BufferList<T> {
    type Lower = <[T] as ComponentType>::Lower;
    const ABI: CanonicalAbiInfo = <[T] as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[T] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: delegates to `[T]`'s lowering of the same values.
#[allow(unsafe_code)]
unsafe impl<T: Lower + ArrowNativeType> Lower for BufferList<T> {
    fn linear_lower_to_flat<U>(
        &self,
        cx: &mut LowerContext<'_, U>,
        ty: InterfaceType,
        dst: &mut MaybeUninit<Self::Lower>,
    ) -> wasmtime::Result<()> {
        <[T] as Lower>::linear_lower_to_flat(self.as_slice(), cx, ty, dst)
    }

    fn linear_lower_to_memory<U>(
        &self,
        cx: &mut LowerContext<'_, U>,
        ty: InterfaceType,
        offset: usize,
    ) -> wasmtime::Result<()> {
        <[T] as Lower>::linear_lower_to_memory(self.as_slice(), cx, ty, offset)
    }
}

/// WIT `utf8-values`, from an Arrow string array's buffers.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct Utf8Values {
    offsets: BufferList<i32>,
    data: BufferList<u8>,
}

/// WIT `values`.
#[derive(ComponentType, Lower)]
#[component(variant)]
pub enum Values {
    #[component(name = "int64")]
    Int64(BufferList<i64>),
    #[component(name = "float64")]
    Float64(BufferList<f64>),
    #[component(name = "boolean")]
    Boolean(BufferList<u8>),
    #[component(name = "utf8")]
    Utf8(Utf8Values),
}

/// WIT `column`: what `batch.column` and `batch.take` return.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct Column {
    values: Values,
    validity: Option<BufferList<u8>>,
}

impl<T: ArrowNativeType> BufferList<T> {
    fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }
}

impl Column {
    /// The same column as the generated bindings' owned type (a copy).
    pub fn to_wit(&self) -> wit::Column {
        let values = match &self.values {
            Values::Int64(v) => wit::Values::Int64(v.to_vec()),
            Values::Float64(v) => wit::Values::Float64(v.to_vec()),
            Values::Boolean(v) => wit::Values::Boolean(v.to_vec()),
            Values::Utf8(u) => wit::Values::Utf8(wit::Utf8Values {
                offsets: u.offsets.to_vec(),
                data: u.data.to_vec(),
            }),
        };
        wit::Column {
            values,
            validity: self.validity.as_ref().map(BufferList::to_vec),
        }
    }
}

/// `array` as its concrete Arrow type, or an error naming the expected one.
fn downcast<'a, T: 'static>(array: &'a dyn Array, what: &str) -> Result<&'a T> {
    array
        .as_any()
        .downcast_ref::<T>()
        .with_context(|| format!("expected a {what} array"))
}

/// The WIT column over `array`'s own buffers (sliced arrays included: only
/// string offsets that do not start at 0 are rebased, into a new buffer).
pub fn column(array: &dyn Array) -> Result<Column> {
    let values = match array.data_type() {
        DataType::Int64 => {
            let values = downcast::<Int64Array>(array, "int64")?.values();
            Values::Int64(BufferList::new(values.inner().clone()))
        }
        DataType::Float64 => {
            let values = downcast::<Float64Array>(array, "float64")?.values();
            Values::Float64(BufferList::new(values.inner().clone()))
        }
        DataType::Boolean => Values::Boolean(BufferList::new(
            downcast::<BooleanArray>(array, "boolean")?
                .values()
                .sliced(),
        )),
        DataType::Utf8 => Values::Utf8(utf8(downcast::<StringArray>(array, "utf8")?)),
        other => bail!("column type {other} cannot be passed to an operator"),
    };
    Ok(Column {
        values,
        validity: array.nulls().map(|n| BufferList::new(n.inner().sliced())),
    })
}

fn utf8(strings: &StringArray) -> Utf8Values {
    let offsets = strings.offsets();
    let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
    let data = strings
        .values()
        .slice_with_length(first as usize, (last - first) as usize);
    let offsets = if first == 0 {
        BufferList::new(offsets.inner().inner().clone())
    } else {
        BufferList::from_vec(offsets.iter().map(|o| o - first).collect())
    };
    Utf8Values {
        offsets,
        data: BufferList::new(data),
    }
}

/// WIT `array-node`, over one node's Arrow buffers.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct ArrayNode {
    len: u32,
    validity: Option<BufferList<u8>>,
    offsets: BufferList<i32>,
    values: BufferList<u8>,
}

/// WIT `array-column`: what `batch.typed-column` and `batch.typed-take`
/// return.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct ArrayColumn {
    nodes: Vec<ArrayNode>,
}

/// The WIT array column over `array`'s own buffers, any type (the
/// rebasing of sliced arrays is [`weir_core::column_tree::visit`]'s).
pub fn array_column(array: &dyn Array) -> Result<ArrayColumn> {
    let mut nodes = Vec::new();
    let empty = || BufferList::new(Buffer::from_vec(Vec::<u8>::new()));
    weir_core::column_tree::visit(array, &mut |view| {
        nodes.push(ArrayNode {
            len: view.len as u32,
            validity: view.validity.map(BufferList::new),
            offsets: BufferList::new(
                view.offsets
                    .unwrap_or_else(|| Buffer::from_vec(Vec::<i32>::new())),
            ),
            values: view.values.map_or_else(empty, BufferList::new),
        })
    })?;
    Ok(ArrayColumn { nodes })
}

/// Replaces the generated `batch.column`, `batch.take`, `batch.typed-column`
/// and `batch.typed-take` imports of the `types` interface with versions
/// that lower from Arrow buffers.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance("weir:operator/types@0.1.0")?;
    types.func_wrap(
        "[method]batch.column",
        |store: StoreContextMut<'_, HostState>, (batch, index): (Resource<InputBatch>, u32)| {
            let array = store.data().input_column(&batch, index)?;
            let column = column(array.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))?;
            Ok((column,))
        },
    )?;
    types.func_wrap(
        "[method]batch.take",
        |store: StoreContextMut<'_, HostState>,
         (batch, index, rows): (Resource<InputBatch>, u32, Vec<u32>)| {
            let taken = store.data().take_rows(&batch, index, rows)?;
            let column = column(taken.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))?;
            Ok((column,))
        },
    )?;
    types.func_wrap(
        "[method]batch.typed-column",
        |store: StoreContextMut<'_, HostState>, (batch, index): (Resource<InputBatch>, u32)| {
            let array = store.data().input_column(&batch, index)?;
            let column =
                array_column(array.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))?;
            Ok((column,))
        },
    )?;
    types.func_wrap(
        "[method]batch.typed-take",
        |store: StoreContextMut<'_, HostState>,
         (batch, index, rows): (Resource<InputBatch>, u32, Vec<u32>)| {
            let taken = store.data().take_rows(&batch, index, rows)?;
            let column =
                array_column(taken.as_ref()).map_err(|e| wasmtime::format_err!("{e:#}"))?;
            Ok((column,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::ArrayRef;
    use std::sync::Arc;

    /// The buffers lowered are the array's own, and slicing keeps values
    /// and offsets right.
    #[test]
    fn columns_share_the_arrays_buffers() {
        let strings = StringArray::from(vec![Some("ab"), None, Some("cde"), Some("f")]);
        let array: ArrayRef = Arc::new(strings.clone());
        let Column { values, validity } = column(array.as_ref()).unwrap();
        let Values::Utf8(u) = values else {
            panic!("utf8 expected")
        };
        assert_eq!(u.data.as_slice().as_ptr(), strings.values().as_ptr());
        assert_eq!(u.offsets.as_slice(), &[0, 2, 2, 5, 6]);
        assert_eq!(validity.unwrap().as_slice(), &[0b1101]);

        let sliced = array.slice(2, 2);
        // The owned copy lookups return carries the same values.
        let owned = column(sliced.as_ref()).unwrap().to_wit();
        let wit::Values::Utf8(u) = owned.values else {
            panic!("utf8 expected")
        };
        assert_eq!((u.offsets, u.data), (vec![0, 3, 4], b"cdef".to_vec()));
        assert_eq!(owned.validity, Some(vec![0b11]));
        let Column { values, validity } = column(sliced.as_ref()).unwrap();
        let Values::Utf8(u) = values else {
            panic!("utf8 expected")
        };
        assert_eq!(u.offsets.as_slice(), &[0, 3, 4]);
        assert_eq!(u.data.as_slice(), b"cdef");
        assert_eq!(validity.unwrap().as_slice(), &[0b11]);

        let amounts: ArrayRef = Arc::new(Float64Array::from(vec![1.5, 2.5, 3.5]));
        let Column { values, .. } = column(amounts.slice(1, 2).as_ref()).unwrap();
        let Values::Float64(f) = values else {
            panic!("float64 expected")
        };
        assert_eq!(f.as_slice(), &[2.5, 3.5]);
    }
}
