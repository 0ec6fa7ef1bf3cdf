//! Python pickles of plain data and numpy arrays, read without running anything: what
//! CIFAR-10's python layout (`cifar-10-batches-py`, the files torchvision downloads) holds.
//!
//! Written here because no crate reads what these files need: `serde-pickle` drops a `BUILD`'s
//! state, where a numpy array keeps its bytes, and burn-store's `pytorch-reader` keeps numpy
//! arrays as opaque objects. And a dataset's array is not wanted in memory at all: a byte
//! string's value is where it lies in the file ([`ByteString`]), so that records are read from
//! the file as the binary layout's are.
//!
//! - `machine.rs`: the opcodes of protocols 2 to 5 (the binary ones) on a stack, with Python's
//!   memo; objects a pickle would construct stay records of their callable, arguments and
//!   state. Within bounded memory: a byte string's value is its place, and a file makes at most
//!   [`MAX_VALUES`] values.
//! - `value.rs`: the values.
//! - `ndarray.rs`: a numpy array (`ndarray.__reduce__`'s or, under protocol 5,
//!   `__reduce_ex__`'s form) as its dtype, shape and the place of its bytes.

mod machine;
mod ndarray;
mod value;

pub(crate) use machine::read_pickle;
pub(crate) use ndarray::{NdArray, ScalarKind, integer_scalar};
pub(crate) use value::{Pickle, Value, ValueId};
