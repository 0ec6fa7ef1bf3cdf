//! TFDS's split specs (`train[:80%]`, `train[-10:]`, `validation+train[1shard:2shard]`, `all`)
//! read as `tfds.core.ReadInstruction.from_spec` reads them, and resolved to records as its
//! `_rel_to_abs_instr` does: percents rounded to the closest record (ties to even, as Python's
//! `round`), negative bounds from the end, bounds past the split an error.

use std::ops::Range;

use super::info::DatasetInfo;

/// One `+`-joined part of a spec: the records `records` of the split `split`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub split: String,
    pub records: Range<u64>,
}

/// The unit of a slice's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Records,
    Percent,
    Shards,
}

/// `spec`'s parts, resolved against `info`'s splits.
pub(super) fn parse(spec: &str, info: &DatasetInfo) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for sub in spec.split('+').map(str::trim) {
        let (name, selector) = split_selector(sub)?;
        if name == "all" {
            if selector.is_some() {
                return Err("`all` takes no slice (as in TFDS)".into());
            }
            for split in &info.splits {
                parts.push(resolve(info, &split.name, None)?);
            }
            continue;
        }
        parts.push(resolve(info, name, selector.map(bounds).transpose()?)?);
    }
    Ok(parts)
}

/// `name[selector]` as TFDS's `_SUB_SPEC_RE` matches it.
fn split_selector(sub: &str) -> Result<(&str, Option<&str>), String> {
    let unrecognized = || format!("unrecognized split {sub:?} (TFDS's format: train[10%:-5])");
    let (name, selector) = match sub.split_once('[') {
        Some((name, rest)) => (name, Some(rest.strip_suffix(']').ok_or_else(unrecognized)?)),
        None => (sub, None),
    };
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "_-".contains(c));
    let selector_ok = selector.is_none_or(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_alphanumeric() || "_%:.-".contains(c))
    });
    match name_ok && selector_ok {
        true => Ok((name, selector)),
        false => Err(unrecognized()),
    }
}

/// A slice's bounds (`from`, `to`) and their unit, as TFDS's `_SLICE_RE` reads them.
fn bounds(selector: &str) -> Result<(Option<f64>, Option<f64>, Unit), String> {
    let pieces: Vec<&str> = selector.split(':').collect();
    let (from, to, unit) = match pieces[..] {
        // `train[x]`: one shard only, as in TFDS.
        [one] => match bound(one)? {
            (Some(value), Some(Unit::Shards)) => {
                let index = integer(value)?;
                (Some(index), Some(index + 1.0), Unit::Shards)
            }
            _ => return Err("a single bound takes shards only (train[1shard]); slice records or percents with a colon".into()),
        },
        [from, to] => {
            let ((from, from_unit), (to, to_unit)) = (bound(from)?, bound(to)?);
            if from.is_none() && to.is_none() {
                return Err(format!("[{selector}] slices nothing"));
            }
            let unit = from_unit.or(to_unit).unwrap_or(Unit::Records);
            let number = |value: Option<&str>| match unit {
                Unit::Percent => value.map(float).transpose(),
                _ => value.map(integer).transpose(),
            };
            (number(from)?, number(to)?, unit)
        }
        _ => return Err(format!("[{selector}] has more than one colon")),
    };
    Ok((from, to, unit))
}

/// One bound of a slice and its unit, if any: `None` for an empty bound.
fn bound(text: &str) -> Result<(Option<&str>, Option<Unit>), String> {
    let (value, unit) = match (text.strip_suffix('%'), text.strip_suffix("shard")) {
        (Some(value), _) => (value, Some(Unit::Percent)),
        (_, Some(value)) => (value, Some(Unit::Shards)),
        _ => (text, None),
    };
    let digits = value.strip_prefix('-').unwrap_or(value);
    let is_number = !digits.is_empty()
        && digits
            .chars()
            .all(|c| c.is_ascii_digit() || "_.".contains(c));
    match (value.is_empty() && unit.is_none(), is_number) {
        (true, _) => Ok((None, None)),
        (false, true) => Ok((Some(value), unit)),
        (false, false) => Err(format!(
            "{text:?} is not a slice bound (10, -10, 10%, 1shard)"
        )),
    }
}

/// A bound as Python's `int` reads it (underscores between digits allowed).
fn integer(text: &str) -> Result<f64, String> {
    let parsed: Option<i64> = text.replace('_', "").parse().ok();
    parsed
        .map(|n| n as f64)
        .ok_or_else(|| format!("{text:?} is not an integer"))
}

/// A percent as Python's `float` reads it.
fn float(text: &str) -> Result<f64, String> {
    let parsed: Option<f64> = text.replace('_', "").parse().ok();
    parsed.ok_or_else(|| format!("{text:?} is not a number"))
}

/// The records of `split` that `bounds` select (all without bounds).
fn resolve(
    info: &DatasetInfo,
    split: &str,
    bounds: Option<(Option<f64>, Option<f64>, Unit)>,
) -> Result<Part, String> {
    let Some(found) = info.split(split) else {
        return Err(format!(
            "unknown split {split:?}: the dataset has {}",
            info.split_names().join(", ")
        ));
    };
    let lengths: Vec<u64> = found.shard_lengths.iter().map(|length| length.0).collect();
    let count: u64 = lengths.iter().sum();
    let Some((from, to, unit)) = bounds else {
        let records = 0..count;
        return Ok(Part {
            split: split.to_string(),
            records,
        });
    };
    if lengths.is_empty() {
        return Err(format!(
            "dataset_info.json counts no records of split {split}: it is read whole only"
        ));
    }
    let n = count as f64;
    // TFDS's `_pct_to_abs_closest`: `int(round(boundary * num_examples / 100.0))`.
    let of_percent = |percent: f64| (percent * n / 100.0).round_ties_even();
    // TFDS's shards: the records of the shards before index `i` (Python's slice of the list).
    let before_shard = |i: f64| {
        let shards = lengths.len() as i64;
        let i = (i as i64).clamp(-shards, shards);
        let i = if i < 0 { shards + i } else { i };
        lengths[..i as usize].iter().sum::<u64>() as f64
    };
    let (from, to) = match unit {
        Unit::Percent => (from.map_or(0.0, of_percent), to.map_or(n, of_percent)),
        Unit::Shards => {
            let to = to.map(|to| {
                if to <= 0.0 {
                    lengths.len() as f64 + to
                } else {
                    to
                }
            });
            (from.map_or(0.0, before_shard), to.map_or(n, before_shard))
        }
        Unit::Records => (from.unwrap_or(0.0), to.unwrap_or(n)),
    };
    if from.abs() > n || to.abs() > n {
        return Err(format!(
            "[{from}:{to}] is past the {count} records of split {split}"
        ));
    }
    let wrap = |bound: f64| if bound < 0.0 { n + bound } else { bound } as u64;
    Ok(Part {
        split: split.to_string(),
        records: wrap(from)..wrap(to).max(wrap(from)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> DatasetInfo {
        serde_json::from_str(
            r#"{"name": "d", "splits": [
                {"name": "train", "shardLengths": ["8", "8", "8"]},
                {"name": "test", "shardLengths": ["9"]}]}"#,
        )
        .unwrap()
    }

    fn records(spec: &str) -> Vec<(String, Range<u64>)> {
        let parts = parse(spec, &info()).unwrap();
        parts.into_iter().map(|p| (p.split, p.records)).collect()
    }

    fn one(spec: &str) -> Range<u64> {
        records(spec)[0].1.clone()
    }

    #[test]
    fn slices_resolve_as_tfds_resolves_them() {
        assert_eq!(one("train"), 0..24);
        assert_eq!(one("train[:30%]"), 0..7);
        assert_eq!(one("train[5:-5]"), 5..19);
        assert_eq!(one("train[-25%:]"), 18..24);
        assert_eq!(one("train[1shard:2shard]"), 8..16);
        assert_eq!(one("train[-1shard:]"), 16..24);
        assert_eq!(one("train[2shard]"), 16..24);
        assert_eq!(one("train[1_0:1_2]"), 10..12);
        // 4.5 and 13.5 records: ties to even, as Python's round.
        assert_eq!(one("test[:50%]"), 0..4);
        assert_eq!(one("test[50%:]"), 4..9);
        assert_eq!(
            records(" test + train[:1] "),
            [("test".into(), 0..9), ("train".into(), 0..1)]
        );
        assert_eq!(records("all").len(), 2);
    }

    #[test]
    fn what_tfds_refuses_is_refused() {
        for (spec, says) in [
            (
                "valid",
                "unknown split \"valid\": the dataset has train, test",
            ),
            ("train[30]", "a single bound takes shards only"),
            ("train[:]", "slices nothing"),
            ("train[1:2:3]", "more than one colon"),
            ("train[25:]", "past the 24 records"),
            ("train[:-30]", "past the 24 records"),
            ("train[a:b]", "is not a slice bound"),
            ("train[1.5:]", "is not an integer"),
            ("train[:10", "unrecognized split"),
            ("all[:10%]", "`all` takes no slice"),
        ] {
            let error = parse(spec, &info()).unwrap_err();
            assert!(error.contains(says), "{spec}: {error}");
        }
    }
}
