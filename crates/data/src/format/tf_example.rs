//! `tf.train.Example` protos with the keys of TF's ImageNet / Inception data.
//!
//! The messages are declared with prost's derive (the four message types of TF's
//! `example.proto` and `feature.proto` that matter), so no `protoc` is needed at build time.
//! [`ImageRecord`] is the typed view of one example: parsing checks each key's presence and
//! type and names the key when it is wrong.

use std::collections::HashMap;

use prost::Message;

use crate::bounding_box::BoundingBox;
use crate::error::{Cause, While};

/// `tf.train.Example`.
#[derive(Clone, PartialEq, Message)]
struct Example {
    #[prost(message, optional, tag = "1")]
    features: Option<Features>,
}

/// `tf.train.Features`.
#[derive(Clone, PartialEq, Message)]
struct Features {
    #[prost(map = "string, message", tag = "1")]
    feature: HashMap<String, Feature>,
}

/// `tf.train.Feature`.
#[derive(Clone, PartialEq, Message)]
struct Feature {
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    kind: Option<Kind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Kind {
    #[prost(message, tag = "1")]
    Bytes(BytesList),
    #[prost(message, tag = "2")]
    Floats(FloatList),
    #[prost(message, tag = "3")]
    Int64s(Int64List),
}

#[derive(Clone, PartialEq, Message)]
struct BytesList {
    #[prost(bytes = "vec", repeated, tag = "1")]
    value: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct FloatList {
    #[prost(float, repeated, tag = "1")]
    value: Vec<f32>,
}

#[derive(Clone, PartialEq, Message)]
struct Int64List {
    #[prost(int64, repeated, tag = "1")]
    value: Vec<i64>,
}

/// The keys TF's `build_imagenet_data.py` writes.
pub mod keys {
    /// Encoded image bytes (JPEG). Required.
    pub const ENCODED: &str = "image/encoded";
    /// Class id, int64 (1..=1000 in TF's layout, 0 being the background class). Required.
    pub const LABEL: &str = "image/class/label";
    /// Human-readable class name.
    pub const TEXT: &str = "image/class/text";
    /// WordNet id of the class, e.g. `n01440764`.
    pub const SYNSET: &str = "image/class/synset";
    /// Box edges, one float per box.
    pub const XMIN: &str = "image/object/bbox/xmin";
    /// See [`XMIN`].
    pub const YMIN: &str = "image/object/bbox/ymin";
    /// See [`XMIN`].
    pub const XMAX: &str = "image/object/bbox/xmax";
    /// See [`XMIN`].
    pub const YMAX: &str = "image/object/bbox/ymax";
    /// Image height in pixels.
    pub const HEIGHT: &str = "image/height";
    /// Image width in pixels.
    pub const WIDTH: &str = "image/width";
    /// Source file name.
    pub const FILENAME: &str = "image/filename";
    /// Image format name, `JPEG`.
    pub const FORMAT: &str = "image/format";
}

/// One image example in TF's ImageNet layout.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageRecord {
    /// The encoded image (JPEG or PNG bytes).
    pub encoded: Vec<u8>,
    /// The class id.
    pub label: i64,
    /// Class name, when present.
    pub text: Option<String>,
    /// Object boxes (empty when the example has none).
    pub boxes: Vec<BoundingBox>,
    /// Height in pixels, when present.
    pub height: Option<i64>,
    /// Width in pixels, when present.
    pub width: Option<i64>,
    /// Source file name, when present.
    pub filename: Option<String>,
}

impl ImageRecord {
    /// Parses a serialized `tf.train.Example`. Missing `image/encoded` or
    /// `image/class/label`, a key of the wrong type, or box lists of different lengths are
    /// errors naming the key.
    pub fn parse(bytes: &[u8]) -> Result<Self, Cause> {
        let reader = ExampleFeatures::parse(bytes)?;
        let encoded = reader.required(keys::ENCODED, ExampleFeatures::bytes)?;
        let label = reader.required(keys::LABEL, ExampleFeatures::int)?;
        let lists = [keys::YMIN, keys::XMIN, keys::YMAX, keys::XMAX].map(|k| reader.floats(k));
        let [ymin, xmin, ymax, xmax] = lists;
        let (ymin, xmin, ymax, xmax) = (ymin?, xmin?, ymax?, xmax?);
        if [xmin.len(), ymax.len(), xmax.len()]
            .iter()
            .any(|&n| n != ymin.len())
        {
            return Err(format!(
                "image/object/bbox/* lists differ in length: ymin {}, xmin {}, ymax {}, xmax {}",
                ymin.len(),
                xmin.len(),
                ymax.len(),
                xmax.len()
            )
            .into());
        }
        let boxes = (0..ymin.len())
            .map(|i| BoundingBox {
                ymin: ymin[i],
                xmin: xmin[i],
                ymax: ymax[i],
                xmax: xmax[i],
            })
            .collect();
        Ok(Self {
            encoded,
            label,
            text: reader.string(keys::TEXT)?,
            boxes,
            height: reader.int(keys::HEIGHT)?,
            width: reader.int(keys::WIDTH)?,
            filename: reader.string(keys::FILENAME)?,
        })
    }

    /// Serializes as a `tf.train.Example` with the same keys TF's converter writes.
    pub fn encode(&self) -> Vec<u8> {
        let mut feature = HashMap::new();
        let mut put = |key: &str, kind: Kind| {
            feature.insert(key.to_string(), Feature { kind: Some(kind) });
        };
        let bytes = |v: &[u8]| {
            Kind::Bytes(BytesList {
                value: vec![v.to_vec()],
            })
        };
        let ints = |v: i64| Kind::Int64s(Int64List { value: vec![v] });
        let floats = |f: fn(&BoundingBox) -> f32| {
            Kind::Floats(FloatList {
                value: self.boxes.iter().map(f).collect(),
            })
        };
        put(keys::ENCODED, bytes(&self.encoded));
        put(keys::FORMAT, bytes(b"JPEG"));
        put(keys::LABEL, ints(self.label));
        put(keys::YMIN, floats(|b| b.ymin));
        put(keys::XMIN, floats(|b| b.xmin));
        put(keys::YMAX, floats(|b| b.ymax));
        put(keys::XMAX, floats(|b| b.xmax));
        if let Some(text) = &self.text {
            put(keys::TEXT, bytes(text.as_bytes()));
        }
        if let Some(h) = self.height {
            put(keys::HEIGHT, ints(h));
        }
        if let Some(w) = self.width {
            put(keys::WIDTH, ints(w));
        }
        if let Some(name) = &self.filename {
            put(keys::FILENAME, bytes(name.as_bytes()));
        }
        Example {
            features: Some(Features { feature }),
        }
        .encode_to_vec()
    }
}

/// The features of one serialized `tf.train.Example`, read by key and type; every error names
/// the key.
pub(crate) struct ExampleFeatures(HashMap<String, Feature>);

impl ExampleFeatures {
    /// The features of a serialized `tf.train.Example`.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, Cause> {
        let example = Example::decode(bytes).map_err(While::doing("not a tf.train.Example"))?;
        Ok(Self(
            example.features.map(|f| f.feature).unwrap_or_default(),
        ))
    }

    /// The one value of `key`, which must be present: an error names the key and the keys
    /// the example has.
    pub(crate) fn required<T>(
        &self,
        key: &str,
        read: fn(&Self, &str) -> Result<Option<T>, Cause>,
    ) -> Result<T, Cause> {
        read(self, key)?.ok_or_else(|| {
            let mut keys: Vec<&str> = self.0.keys().map(String::as_str).collect();
            keys.sort_unstable();
            format!("missing key {key} (the example has: {})", keys.join(", ")).into()
        })
    }

    fn kind(&self, key: &str) -> Option<&Kind> {
        self.0.get(key).and_then(|f| f.kind.as_ref())
    }

    fn wrong_type(key: &str, want: &str, got: &Kind) -> String {
        let got = match got {
            Kind::Bytes(_) => "bytes_list",
            Kind::Floats(_) => "float_list",
            Kind::Int64s(_) => "int64_list",
        };
        format!("key {key} is a {got}, expected {want}")
    }

    fn single<T: Clone>(key: &str, values: &[T]) -> Result<Option<T>, Cause> {
        match values {
            [] => Ok(None),
            [v] => Ok(Some(v.clone())),
            _ => Err(format!("key {key} holds {} values, expected one", values.len()).into()),
        }
    }

    /// The one value of the `bytes_list` `key`; `None` when absent or empty.
    pub(crate) fn bytes(&self, key: &str) -> Result<Option<Vec<u8>>, Cause> {
        match self.kind(key) {
            None => Ok(None),
            Some(Kind::Bytes(list)) => Self::single(key, &list.value),
            Some(other) => Err(Self::wrong_type(key, "bytes_list", other).into()),
        }
    }

    fn string(&self, key: &str) -> Result<Option<String>, Cause> {
        self.bytes(key)?
            .map(|b| {
                String::from_utf8(b).map_err(|_| format!("key {key} is not UTF-8 text").into())
            })
            .transpose()
    }

    /// The one value of the `int64_list` `key`; `None` when absent or empty.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, Cause> {
        match self.kind(key) {
            None => Ok(None),
            Some(Kind::Int64s(list)) => Self::single(key, &list.value),
            Some(other) => Err(Self::wrong_type(key, "int64_list", other).into()),
        }
    }

    fn floats(&self, key: &str) -> Result<Vec<f32>, Cause> {
        match self.kind(key) {
            None => Ok(Vec::new()),
            Some(Kind::Floats(list)) => Ok(list.value.clone()),
            Some(other) => Err(Self::wrong_type(key, "float_list", other).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use towers_testing::assert_error_names;

    use super::*;

    /// Protobuf wire bytes written by hand for a length-delimited field: key byte, varint
    /// length (7 bits a byte, low first), payload.
    fn field(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(tag << 3) | 2];
        let mut len = payload.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(payload);
        out
    }

    /// A map entry of `Features`: key string (1), value Feature (2).
    fn entry(key: &str, feature: Vec<u8>) -> Vec<u8> {
        field(1, &[field(1, key.as_bytes()), field(2, &feature)].concat())
    }

    /// An Example built byte by byte, the way TF serializes it (packed int64 and float lists).
    fn hand_built_example() -> Vec<u8> {
        let encoded = field(1, &field(1, b"\xff\xd8jpeg"));
        // Int64List { value: [417] } packed: tag 1 wire 2, len 2, varint 417 = 0xa1 0x03
        let label = field(3, &field(1, &[0xa1, 0x03]));
        let floats = |v: f32| field(2, &field(1, &v.to_le_bytes()));
        let text = field(1, &field(1, b"hammer"));
        let features = [
            entry(keys::ENCODED, encoded),
            entry(keys::LABEL, label),
            entry(keys::TEXT, text),
            entry(keys::YMIN, floats(0.25)),
            entry(keys::XMIN, floats(0.125)),
            entry(keys::YMAX, floats(0.75)),
            entry(keys::XMAX, floats(1.0)),
        ]
        .concat();
        field(1, &features)
    }

    #[test]
    fn parses_a_hand_built_example() {
        let r = ImageRecord::parse(&hand_built_example()).unwrap();
        assert_eq!(r.encoded, b"\xff\xd8jpeg");
        assert_eq!(r.label, 417);
        assert_eq!(r.text.as_deref(), Some("hammer"));
        assert_eq!(
            r.boxes,
            vec![BoundingBox {
                ymin: 0.25,
                xmin: 0.125,
                ymax: 0.75,
                xmax: 1.0
            }]
        );
        assert_eq!((r.height, r.width, r.filename), (None, None, None));
    }

    #[test]
    fn encode_round_trips() {
        let r = ImageRecord {
            encoded: vec![1, 2, 3],
            label: 7,
            text: Some("tench".into()),
            boxes: vec![
                BoundingBox::WHOLE,
                BoundingBox {
                    ymin: 0.1,
                    xmin: 0.2,
                    ymax: 0.3,
                    xmax: 0.4,
                },
            ],
            height: Some(300),
            width: Some(400),
            filename: Some("n01440764_10026.JPEG".into()),
        };
        assert_eq!(ImageRecord::parse(&r.encode()).unwrap(), r);
    }

    #[test]
    fn missing_and_mistyped_keys_are_named() {
        let no_label = field(1, &entry(keys::ENCODED, field(1, &field(1, b"x"))));
        assert_eq!(
            ImageRecord::parse(&no_label).unwrap_err().to_string(),
            "missing key image/class/label (the example has: image/encoded)"
        );
        let float_label = field(
            1,
            &[
                entry(keys::ENCODED, field(1, &field(1, b"x"))),
                entry(keys::LABEL, field(2, &field(1, &1f32.to_le_bytes()))),
            ]
            .concat(),
        );
        let msg = ImageRecord::parse(&float_label).unwrap_err().to_string();
        assert_error_names(&msg, &["image/class/label", "float_list"]);
        assert!(
            ImageRecord::parse(b"\xff\xff\xff")
                .unwrap_err()
                .to_string()
                .contains("not a tf.train.Example")
        );
    }
}
