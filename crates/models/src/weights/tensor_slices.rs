//! Partitioned variables: a tensor saved as slices (`tf.compat.v1.get_variable(...,
//! partitioner=...)`, TF 1's way to spread a large embedding or layer over parameter servers),
//! each slice a box of the whole tensor saved on its own. TF restores such a variable into one
//! of any partitioning, a whole tensor included, by putting its slices back together
//! (`BundleReader::LookupSlice`, `TensorSliceReader`); so do the checkpoint readers here, with
//! this module.
//!
//! TF cannot restore 16-bit floats or strings saved so ("Dtype half not supported"); they are
//! put together here all the same, as any other type.

use std::fmt;
use std::ops::Range;

use super::tf_checkpoint::{TfValues, element_count};
use super::tf_proto::TensorSlice;

/// One saved slice of a tensor: the range of indices it holds in each dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SliceBox {
    ranges: Vec<Range<usize>>,
}

impl SliceBox {
    /// `slice` of a tensor of `shape`: an extent for each dimension (a start and a length, or
    /// neither for the whole dimension), or none at all for the whole tensor. Error: why it
    /// is not a slice of such a tensor.
    pub(super) fn of(slice: &TensorSlice, shape: &[usize]) -> Result<Self, String> {
        if slice.extent.is_empty() {
            return Ok(Self::whole(shape));
        }
        if slice.extent.len() != shape.len() {
            return Err(format!(
                "a slice of {} dimensions, of a tensor of shape {shape:?}",
                slice.extent.len()
            ));
        }
        let ranges = (slice.extent.iter().zip(shape))
            .map(|(extent, &dim)| {
                let Some(length) = extent.length else {
                    return match extent.start {
                        0 => Ok(0..dim),
                        start => Err(format!("a whole dimension said to start at {start}")),
                    };
                };
                let (Ok(start), Ok(length)) =
                    (usize::try_from(extent.start), usize::try_from(length))
                else {
                    return Err(format!("an extent of {},{length}", extent.start));
                };
                match start.checked_add(length).filter(|&end| end <= dim) {
                    Some(end) => Ok(start..end),
                    None => Err(format!(
                        "an extent of {start},{length} in a dimension of {dim}"
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { ranges })
    }

    /// All of a tensor of `shape`.
    fn whole(shape: &[usize]) -> Self {
        Self {
            ranges: shape.iter().map(|&dim| 0..dim).collect(),
        }
    }

    /// The slice's own shape.
    pub(super) fn shape(&self) -> Vec<usize> {
        self.ranges.iter().map(|range| range.len()).collect()
    }

    /// The places in the whole tensor (of `shape`, row-major) of the slice's elements, in
    /// the slice's row-major order, as runs of consecutive places: one run along the last
    /// dimension for each index of the others.
    fn runs<'a>(&'a self, shape: &'a [usize]) -> impl Iterator<Item = Range<usize>> + 'a {
        // A scalar is one run of one element.
        let (last, outer) = (self.ranges.split_last())
            .map_or((0..1, &[][..]), |(last, outer)| (last.clone(), outer));
        let runs: usize = outer.iter().map(|range| range.len()).product();
        (0..runs).map(move |mut run| {
            let mut start = last.start;
            let mut stride = shape.last().copied().unwrap_or(1);
            for (range, &dim) in outer.iter().zip(shape).rev() {
                start += (range.start + run % range.len()) * stride;
                run /= range.len();
                stride *= dim;
            }
            start..start + last.len()
        })
    }
}

/// TF's notation of a slice (`TensorSlice::DebugString`): `start,length` per dimension,
/// separated by `:`.
impl fmt::Display for SliceBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let extents: Vec<String> = (self.ranges.iter())
            .map(|range| format!("{},{}", range.start, range.len()))
            .collect();
        f.write_str(&extents.join(":"))
    }
}

/// The key of slice `slice` of the tensor `name` in a V2 checkpoint's index, as TF writes it
/// (`checkpoint::EncodeTensorNameSlice`, in TF's `OrderedCode`): a 0, the name, the number of
/// dimensions, then each extent's start and length (-1 for a whole dimension). Written here
/// because no crate has TF's `OrderedCode`.
pub(super) fn slice_key(name: &str, slice: &TensorSlice) -> Vec<u8> {
    let mut key = Vec::new();
    write_unsigned(&mut key, 0);
    write_string(&mut key, name.as_bytes());
    write_unsigned(&mut key, slice.extent.len() as u64);
    for extent in &slice.extent {
        write_signed(&mut key, extent.start);
        write_signed(&mut key, extent.length.unwrap_or(-1));
    }
    key
}

/// `OrderedCode::WriteNumIncreasing`: the number of bytes, then the bytes big-endian without
/// leading zeros.
fn write_unsigned(out: &mut Vec<u8>, value: u64) {
    let bytes = value.to_be_bytes();
    let significant = &bytes[value.leading_zeros() as usize / 8..];
    out.push(significant.len() as u8);
    out.extend_from_slice(significant);
}

/// `OrderedCode::WriteString`: the bytes with 0 written as `00 ff` and 255 as `ff 00`, then
/// `00 01`.
fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    for &byte in bytes {
        match byte {
            0x00 => out.extend_from_slice(&[0x00, 0xff]),
            0xff => out.extend_from_slice(&[0xff, 0x00]),
            _ => out.push(byte),
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// `OrderedCode::WriteSignedNumIncreasing`: `value` in two's complement, big-endian, in the
/// fewest of 1 to 10 bytes that leave room for a header of as many bits as the length (each
/// the complement of the sign bit for a negative number): n bytes hold [-2^(7n-1), 2^(7n-1)).
fn write_signed(out: &mut Vec<u8>, value: i64) {
    let magnitude = if value < 0 { !value } else { value } as u64;
    let bits = 64 - magnitude.leading_zeros() as usize;
    // TF's `kBitsToLength`: each byte adds 7 bits of room for the number and its sign.
    let length = bits / 7 + 1;
    let sign = if value < 0 { 0xff } else { 0x00 };
    let mut bytes = [sign; 10];
    bytes[2..].copy_from_slice(&value.to_be_bytes());
    let encoded = &mut bytes[10 - length..];
    // The header: `length` ones (for a number not negative), then a zero, counted from the
    // first byte's top bit; XOR-ed in, so a negative number's leading ones become zeros.
    let header = !0u16 << (16 - length);
    encoded[0] ^= (header >> 8) as u8;
    if length > 1 {
        encoded[1] ^= header as u8;
    }
    out.extend_from_slice(encoded);
}

/// The whole tensor of `shape` from `parts`, each a slice and its values (of the slice's
/// shape, row-major; all of one kind). Error: slices that do not make up the tensor exactly
/// once (their sizes checked before anything is allocated for the tensor), or values of
/// another kind or number.
pub(super) fn assemble(
    shape: &[usize],
    parts: Vec<(SliceBox, TfValues)>,
) -> Result<TfValues, String> {
    let total = element_count(shape).ok_or("a shape too large to hold")?;
    let held = (parts.iter())
        .map(|(slice, _)| element_count(&slice.shape()).unwrap_or(u64::MAX))
        .try_fold(0u64, u64::checked_add);
    if held != Some(total) {
        return Err(format!(
            "its slices hold {} values, of a tensor of shape {shape:?} ({total} values)",
            held.map_or("too many".to_string(), |n| n.to_string())
        ));
    }
    if let [(slice, _)] = parts.as_slice()
        && *slice == SliceBox::whole(shape)
    {
        return Ok(parts.into_iter().next().expect("one part").1);
    }
    Ok(match parts.first().map(|(_, values)| values) {
        Some(TfValues::Float(_)) => TfValues::Float(place(shape, parts, |v| match v {
            TfValues::Float(v) => Some(v),
            _ => None,
        })?),
        Some(TfValues::Int(_)) => TfValues::Int(place(shape, parts, |v| match v {
            TfValues::Int(v) => Some(v),
            _ => None,
        })?),
        Some(TfValues::Bool(_)) => TfValues::Bool(place(shape, parts, |v| match v {
            TfValues::Bool(v) => Some(v),
            _ => None,
        })?),
        Some(TfValues::String(_)) | None => TfValues::String(place(shape, parts, |v| match v {
            TfValues::String(v) => Some(v),
            _ => None,
        })?),
    })
}

/// The tensor of `shape` with each part's values in its slice's places; `values_of` takes a
/// part's values of the kind wanted (`None` for another kind). The caller has checked that the
/// slices hold as many elements as the tensor: so an element no slice holds is one that two
/// slices hold, which is an error.
fn place<T: Clone + Default>(
    shape: &[usize],
    parts: Vec<(SliceBox, TfValues)>,
    values_of: fn(TfValues) -> Option<Vec<T>>,
) -> Result<Vec<T>, String> {
    let total = shape.iter().product();
    let mut whole = vec![T::default(); total];
    let mut placed = vec![false; total];
    for (slice, values) in parts {
        let values =
            values_of(values).ok_or_else(|| format!("slice {slice}: values of another type"))?;
        let places: usize = slice.shape().iter().product();
        if values.len() != places {
            return Err(format!(
                "slice {slice}: {} values for {places} places",
                values.len()
            ));
        }
        let mut values = values.into_iter();
        for at in slice.runs(shape).flatten() {
            if std::mem::replace(&mut placed[at], true) {
                return Err(format!(
                    "its slices overlap (slice {slice} holds element {at} again)"
                ));
            }
            whole[at] = values.next().expect("as many values as places");
        }
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::tf_proto::Extent;

    fn slice(extents: &[(i64, Option<i64>)]) -> TensorSlice {
        TensorSlice {
            extent: (extents.iter())
                .map(|&(start, length)| Extent { start, length })
                .collect(),
        }
    }

    fn signed(value: i64) -> Vec<u8> {
        let mut out = Vec::new();
        write_signed(&mut out, value);
        out
    }

    /// TF's own examples (`ordered_code.cc`: 0x424242 is `f0 42 42 42`, -0x800 is `38 00`)
    /// and the edges of each length: n bytes hold [-2^(7n-1), 2^(7n-1)).
    #[test]
    fn signed_numbers_are_written_as_tfs_ordered_code_writes_them() {
        assert_eq!(signed(0x424242), [0xf0, 0x42, 0x42, 0x42]);
        assert_eq!(signed(-0x800), [0x38, 0x00]);
        assert_eq!(signed(0), [0x80]);
        assert_eq!(signed(-1), [0x7f]);
        assert_eq!(signed(63), [0xbf]);
        assert_eq!(signed(-64), [0x40]);
        assert_eq!(signed(64), [0xc0, 0x40]);
        assert_eq!(signed(8191), [0xdf, 0xff]);
        assert_eq!(signed(8192), [0xe0, 0x20, 0x00]);
        assert_eq!(signed(1 << 20), [0xf0, 0x10, 0x00, 0x00]);
        assert_eq!(signed(i64::MAX).len(), 10);
        assert_eq!(signed(i64::MAX)[..2], [0xff, 0xc0]);
        assert_eq!(signed(i64::MIN)[..2], [0x00, 0x3f]);
    }

    #[test]
    fn unsigned_numbers_and_strings_are_written_as_tfs_ordered_code_writes_them() {
        let mut out = Vec::new();
        write_unsigned(&mut out, 0);
        write_unsigned(&mut out, 0x0102);
        write_string(&mut out, b"a\x00b\xff");
        assert_eq!(out, [0, 2, 1, 2, b'a', 0, 0xff, b'b', 0xff, 0, 0, 1]);
    }

    /// The slices of a 3x4 tensor, cut into rows 0..2 and 2..3 and the second into columns,
    /// put back in place whatever their order.
    #[test]
    fn slices_are_put_together_in_place() {
        let shape = [3, 4];
        let top = SliceBox::of(&slice(&[(0, Some(2)), (0, None)]), &shape).unwrap();
        let left = SliceBox::of(&slice(&[(2, Some(1)), (0, Some(1))]), &shape).unwrap();
        let right = SliceBox::of(&slice(&[(2, Some(1)), (1, Some(3))]), &shape).unwrap();
        assert_eq!(right.to_string(), "2,1:1,3");
        let top_values = TfValues::Int((0..8).collect());
        let parts = vec![
            (right.clone(), TfValues::Int(vec![9, 10, 11])),
            (top.clone(), top_values.clone()),
            (left.clone(), TfValues::Int(vec![8])),
        ];
        assert_eq!(
            assemble(&shape, parts).unwrap(),
            TfValues::Int((0..12).collect())
        );
        // As many values as the tensor, but rows 1..3 of the first two columns overlap the top.
        let low_left = SliceBox::of(&slice(&[(1, Some(2)), (0, Some(2))]), &shape).unwrap();
        let overlapping = vec![
            (top.clone(), top_values.clone()),
            (low_left, TfValues::Int(vec![4, 5, 8, 9])),
        ];
        let error = assemble(&shape, overlapping).unwrap_err();
        assert!(error.contains("overlap"), "{error}");
        let missing = vec![(top, top_values), (right, TfValues::Int(vec![9, 10, 11]))];
        let error = assemble(&shape, missing).unwrap_err();
        assert!(error.contains("hold 11 values"), "{error}");
    }

    #[test]
    fn slices_outside_their_tensor_are_refused() {
        let shape = [3, 4];
        for (extents, reason) in [
            (vec![(2, Some(2)), (0, None)], "2,2 in a dimension of 3"),
            (vec![(-1, Some(1)), (0, None)], "-1,1"),
            (vec![(0, None)], "a slice of 1 dimensions"),
            (vec![(1, None), (0, None)], "start at 1"),
        ] {
            let error = SliceBox::of(&slice(&extents), &shape).unwrap_err();
            assert!(error.contains(reason), "{error}");
        }
    }
}
