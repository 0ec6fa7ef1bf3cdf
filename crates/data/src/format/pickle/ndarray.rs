//! A pickled numpy array as what it is: its element type, shape and the place of its bytes.
//!
//! numpy pickles an array in one of two forms, both read here:
//! - `ndarray.__reduce__`: `_reconstruct(ndarray, (0,), b'b')` then `BUILD` with the state
//!   `(version, shape, dtype, is_fortran, raw_bytes)` (numpy's `array_setstate`; Python 2's
//!   pickles, protocols 2 to 4);
//! - `ndarray.__reduce_ex__(5)`: `_frombuffer(buffer, dtype, shape, order)` (protocol 5, for
//!   arrays contiguous in memory; others take the first form there too).
//!
//! Python 3 at protocol 2 writes an array's bytes as latin-1 text to be encoded back
//! (`_codecs.encode`): refused, with what to do, as the bytes are not in the file as they are.
//!
//! A dtype is `dtype(code, align, copy)` then `BUILD` with `(version, byte_order, ...)`.

use super::value::{ByteString, Pickle, Value, ValueId, little_endian_int};

/// The kind of number an array holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    Bool,
    Signed,
    Unsigned,
    Float,
}

/// A numpy array's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dtype {
    pub kind: ScalarKind,
    /// Bytes per element.
    pub size: u64,
    pub big_endian: bool,
}

impl std::fmt::Display for Dtype {
    /// numpy's code: `|u1`, `<i8`, `>f4`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let order = match (self.size, self.big_endian) {
            (1, _) => '|',
            (_, true) => '>',
            (_, false) => '<',
        };
        let kind = match self.kind {
            ScalarKind::Bool => 'b',
            ScalarKind::Signed => 'i',
            ScalarKind::Unsigned => 'u',
            ScalarKind::Float => 'f',
        };
        write!(f, "{order}{kind}{}", self.size)
    }
}

impl Dtype {
    /// Whether it holds integers, signed or not.
    pub(crate) fn is_integer(&self) -> bool {
        matches!(self.kind, ScalarKind::Signed | ScalarKind::Unsigned)
    }

    /// The integer of one element's `bytes` of an integer dtype, in its byte order.
    pub(crate) fn integer(&self, bytes: &[u8]) -> i64 {
        let mut little = bytes.to_vec();
        if self.big_endian {
            little.reverse();
        }
        little_endian_int(&little, self.kind == ScalarKind::Signed)
    }
}

/// A numpy array of numbers, its bytes left in the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NdArray {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// Column-major (`order='F'`) rather than row-major.
    pub fortran: bool,
    /// Its bytes: the product of the shape times the element size.
    pub data: ByteString,
}

/// The qualified names numpy 1 and 2 pickle arrays under.
const RECONSTRUCT: [&str; 2] = [
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
];
const FROM_BUFFER: [&str; 2] = [
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
];
const SCALAR: [&str; 2] = [
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
];

impl NdArray {
    /// The array `id` holds, or why it is not a numpy array of numbers.
    pub(crate) fn from_pickle(pickle: &Pickle, id: ValueId) -> Result<Self, String> {
        let Value::Object {
            callable,
            args,
            state,
        } = pickle.value(id)
        else {
            return Err(format!("{}, not a numpy array", pickle.type_name(id)));
        };
        if RECONSTRUCT.contains(&callable.as_str()) {
            let state = state.ok_or("a numpy array without its state")?;
            from_state(pickle, state)
        } else if FROM_BUFFER.contains(&callable.as_str()) {
            from_buffer_args(pickle, *args)
        } else {
            Err(format!("an object made by {callable}, not a numpy array"))
        }
    }
}

/// The integer a pickled numpy integer scalar (`multiarray.scalar(dtype, bytes)`, what
/// `np.int64(3)` pickles as) holds, or `None` when `id` is not one.
pub(crate) fn integer_scalar(pickle: &Pickle, id: ValueId) -> Option<i64> {
    let Value::Object { callable, args, .. } = pickle.value(id) else {
        return None;
    };
    if !SCALAR.contains(&callable.as_str()) {
        return None;
    }
    let [dtype, bytes] = pickle.items(*args)? else {
        return None;
    };
    let dtype = parse_dtype(pickle, *dtype).ok()?;
    let Value::Bytes(ByteString {
        content: Some(bytes),
        ..
    }) = pickle.value(*bytes)
    else {
        return None;
    };
    (dtype.is_integer() && bytes.len() as u64 == dtype.size).then(|| dtype.integer(bytes))
}

/// `array_setstate`'s `(version, shape, dtype, is_fortran, raw)`, or the same without the
/// version.
fn from_state(pickle: &Pickle, state: ValueId) -> Result<NdArray, String> {
    let items = pickle.items(state).unwrap_or_default();
    let fields = match items.len() {
        5 => &items[1..],
        4 => items,
        _ => return Err(format!("a numpy array's state of {} items", items.len())),
    };
    let fortran = match pickle.value(fields[2]) {
        Value::Bool(flag) => *flag,
        Value::Int(flag) => *flag != 0,
        _ => return Err("a numpy array's order flag that is not a bool".into()),
    };
    array(pickle, fields[1], fields[0], fortran, fields[3])
}

/// `_frombuffer(buffer, dtype, shape, order)`.
fn from_buffer_args(pickle: &Pickle, args: ValueId) -> Result<NdArray, String> {
    let items = pickle.items(args).unwrap_or_default();
    let [buffer, dtype, shape, order] = items else {
        return Err(format!("_frombuffer with {} arguments", items.len()));
    };
    let fortran = match pickle.text(*order) {
        Some("C") => false,
        Some("F") => true,
        _ => return Err("_frombuffer's order is neither 'C' nor 'F'".into()),
    };
    array(pickle, *dtype, *shape, fortran, *buffer)
}

fn array(
    pickle: &Pickle,
    dtype: ValueId,
    shape: ValueId,
    fortran: bool,
    data: ValueId,
) -> Result<NdArray, String> {
    let dtype = parse_dtype(pickle, dtype)?;
    let shape = parse_shape(pickle, shape)?;
    let data = match pickle.value(data) {
        Value::Bytes(data) => data,
        Value::Object { callable, .. } if callable == "_codecs.encode" => {
            return Err(
                "a numpy array whose bytes were pickled as latin-1 text (Python 3 at \
                        pickle protocol 2): re-save it with protocol 3 or later"
                    .into(),
            );
        }
        _ => {
            return Err(format!(
                "a numpy array whose data is {} (an array of Python objects?)",
                pickle.type_name(data)
            ));
        }
    };
    let wanted = shape
        .iter()
        .try_fold(dtype.size, |bytes, &dim| bytes.checked_mul(dim));
    if wanted != Some(data.len) {
        return Err(format!(
            "a numpy array of shape {shape:?} and dtype {dtype} holding {} bytes",
            data.len
        ));
    }
    Ok(NdArray {
        dtype,
        shape,
        fortran,
        data: data.clone(),
    })
}

fn parse_shape(pickle: &Pickle, shape: ValueId) -> Result<Vec<u64>, String> {
    let dims = pickle
        .items(shape)
        .ok_or("a numpy array's shape that is not a tuple")?;
    dims.iter()
        .map(|&dim| match pickle.value(dim) {
            Value::Int(n) => u64::try_from(*n).map_err(|_| format!("a dimension of {n}")),
            _ => Err("a numpy array's dimension that is not an int".into()),
        })
        .collect()
}

/// `dtype(code, align, copy)` with its state `(version, byte_order, ...)`.
fn parse_dtype(pickle: &Pickle, dtype: ValueId) -> Result<Dtype, String> {
    let Value::Object {
        callable,
        args,
        state,
    } = pickle.value(dtype)
    else {
        return Err(format!("a dtype that is {}", pickle.type_name(dtype)));
    };
    if callable != "numpy.dtype" {
        return Err(format!("a dtype made by {callable}"));
    }
    let code = pickle
        .items(*args)
        .and_then(|args| args.first())
        .and_then(|&code| pickle.text(code))
        .ok_or("a dtype without its code")?;
    let order = state
        .and_then(|state| pickle.items(state))
        .and_then(|state| state.get(1))
        .and_then(|&order| pickle.text(order));
    let (order_in_code, code) = match code.strip_prefix(['<', '>', '|', '=']) {
        Some(rest) => (&code[..1], rest),
        None => ("", code),
    };
    let big_endian = order.unwrap_or(order_in_code) == ">";
    let kind = match code.chars().next() {
        Some('b') => ScalarKind::Bool,
        Some('i') => ScalarKind::Signed,
        Some('u') => ScalarKind::Unsigned,
        Some('f') => ScalarKind::Float,
        _ => return Err(format!("dtype '{code}': not a dtype of numbers")),
    };
    let size: u64 = code[1..]
        .parse()
        .map_err(|_| format!("dtype '{code}': not a dtype of numbers"))?;
    if !matches!(size, 1 | 2 | 4 | 8) {
        return Err(format!("dtype '{code}': elements of {size} bytes"));
    }
    Ok(Dtype {
        kind,
        size,
        big_endian,
    })
}
