//! Random edits of seed files: the mutations of a mutation-based fuzzer, as proptest
//! strategies (so a failing input shrinks to its fewest, smallest edits).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

/// Values that break parsers: zero, one, sign bits, all ones, and 2^60 as a length.
const INTERESTING: [u64; 9] = [
    0,
    1,
    0x7f,
    0x80,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 60,
    u64::MAX,
];

/// One edit; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    /// Flip one bit.
    FlipBit { at: usize, bit: u8 },
    /// Set one byte.
    SetByte { at: usize, value: u8 },
    /// Write an interesting value in one of the encodings formats use.
    Interesting {
        at: usize,
        value: u64,
        encoding: Encoding,
    },
    /// Insert random bytes.
    Insert { at: usize, bytes: Vec<u8> },
    /// Remove up to `len` bytes.
    Remove { at: usize, len: usize },
    /// Copy a span of the input over another place of it.
    Copy { from: usize, to: usize, len: usize },
    /// Cut the input short.
    Truncate { at: usize },
}

/// How an interesting value is written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Encoding {
    /// 8 bytes, little-endian (TFRecord lengths, checkpoint headers).
    U64Le,
    /// 4 bytes, little-endian (CRCs).
    U32Le,
    /// 4 bytes, big-endian (PNG chunk lengths).
    U32Be,
    /// 2 bytes, big-endian (JPEG segment lengths and sizes).
    U16Be,
    /// A protobuf varint (field lengths in a `tf.train.Example`).
    Varint,
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    let encoding = prop_oneof![
        Just(Encoding::U64Le),
        Just(Encoding::U32Le),
        Just(Encoding::U32Be),
        Just(Encoding::U16Be),
        Just(Encoding::Varint),
    ];
    prop_oneof![
        3 => (at, 0u8..8).prop_map(|(at, bit)| Edit::FlipBit { at, bit }),
        2 => (at, any::<u8>()).prop_map(|(at, value)| Edit::SetByte { at, value }),
        2 => (at, select(&INTERESTING[..]), encoding)
            .prop_map(|(at, value, encoding)| Edit::Interesting { at, value, encoding }),
        1 => (at, vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Edit::Insert { at, bytes }),
        1 => (at, 1usize..64).prop_map(|(at, len)| Edit::Remove { at, len }),
        1 => (at, at, 1usize..64).prop_map(|(from, to, len)| Edit::Copy { from, to, len }),
        1 => at.prop_map(|at| Edit::Truncate { at }),
    ]
}

/// A seed with 1 to 4 edits (most inputs keep most of their structure).
pub(crate) fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (select(seeds), vec(edit(), 1..5)).prop_map(|(mut input, edits)| {
        for edit in &edits {
            apply(&mut input, edit);
        }
        input
    })
}

fn encode(value: u64, encoding: Encoding) -> Vec<u8> {
    match encoding {
        Encoding::U64Le => value.to_le_bytes().to_vec(),
        Encoding::U32Le => (value as u32).to_le_bytes().to_vec(),
        Encoding::U32Be => (value as u32).to_be_bytes().to_vec(),
        Encoding::U16Be => (value as u16).to_be_bytes().to_vec(),
        Encoding::Varint => {
            let mut out = Vec::new();
            let mut v = value;
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
            out
        }
    }
}

fn apply(input: &mut Vec<u8>, edit: &Edit) {
    let len = input.len();
    let pos = |at: usize| if len == 0 { 0 } else { at % len };
    match edit {
        Edit::FlipBit { at, bit } if len > 0 => input[pos(*at)] ^= 1 << bit,
        Edit::SetByte { at, value } if len > 0 => input[pos(*at)] = *value,
        Edit::Interesting {
            at,
            value,
            encoding,
        } => {
            let bytes = encode(*value, *encoding);
            let start = pos(*at);
            let end = (start + bytes.len()).min(len);
            input.splice(start..end, bytes);
        }
        Edit::Insert { at, bytes } => {
            let at = if len == 0 { 0 } else { at % (len + 1) };
            input.splice(at..at, bytes.iter().copied());
        }
        Edit::Remove { at, len: n } if len > 0 => {
            let start = pos(*at);
            input.drain(start..(start + n).min(len));
        }
        Edit::Copy { from, to, len: n } if len > 0 => {
            let from = pos(*from);
            let span: Vec<u8> = input[from..(from + n).min(len)].to_vec();
            let to = pos(*to);
            let end = (to + span.len()).min(len);
            input.splice(to..end, span);
        }
        Edit::Truncate { at } => input.truncate(if len == 0 { 0 } else { at % len }),
        _ => {}
    }
}
