//! A model summary as Keras prints one: [`ParameterRow`]s (layer, output shape, parameters)
//! and the plain-text table of them ([`parameter_table`]).

use crate::params::ParamCounts;
use crate::params::count_params_by_field;
use burn::module::Module;
use std::fmt::Write;

/// One line of a model summary: a layer or block, its output shape, its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterRow {
    /// Layer or block name, TF's where there is one.
    pub name: String,
    /// Output shape, batch first; empty for parameters that belong to no named output.
    pub output_shape: Vec<usize>,
    /// Parameters of the layer.
    pub params: ParamCounts,
}

/// A plain-text table of `rows` under `title`, with the totals on the last line.
pub fn parameter_table(title: &str, rows: &[ParameterRow], total: ParamCounts) -> String {
    let shape = |row: &ParameterRow| match row.output_shape.is_empty() {
        true => "-".to_string(),
        false => format!("{:?}", row.output_shape),
    };
    let name_w = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(5);
    let shape_w = rows
        .iter()
        .map(|r| shape(r).len())
        .max()
        .unwrap_or(0)
        .max(12);
    let mut out = String::new();
    writeln!(out, "{title}").unwrap();
    writeln!(
        out,
        "{:<name_w$}  {:<shape_w$}  {:>12}  {:>8}",
        "Layer", "Output shape", "Params", "Moving"
    )
    .unwrap();
    for row in rows {
        writeln!(
            out,
            "{:<name_w$}  {:<shape_w$}  {:>12}  {:>8}",
            row.name,
            shape(row),
            thousands(row.params.trainable),
            thousands(row.params.moving)
        )
        .unwrap();
    }
    write!(
        out,
        "Total: {} trainable parameters, {} moving statistics",
        thousands(total.trainable),
        thousands(total.moving)
    )
    .unwrap();
    out
}

/// Rows for a model whose named outputs are its top-level fields, matched ignoring case and
/// underscores (`Mixed_5b` is the field `mixed_5b`, `AuxLogits` the field `aux_logits`).
/// Fields with parameters that no output names get a row of their own, so the rows always add
/// up to the totals.
pub(crate) fn model_rows<M: Module>(
    model: &M,
    endpoints: Vec<(&'static str, Vec<usize>)>,
) -> Vec<ParameterRow> {
    let key = |name: &str| name.replace('_', "").to_lowercase();
    let mut fields = count_params_by_field(model);
    let mut rows: Vec<ParameterRow> = endpoints
        .into_iter()
        .map(|(name, output_shape)| {
            let params = fields
                .iter()
                .position(|(field, _)| key(field) == key(name))
                .map(|i| fields.remove(i).1)
                .unwrap_or_default();
            ParameterRow {
                name: name.to_string(),
                output_shape,
                params,
            }
        })
        .collect();
    rows.extend(fields.into_iter().map(|(name, params)| ParameterRow {
        name,
        output_shape: Vec::new(),
        params,
    }));
    rows
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_rows_and_totals_with_separators() {
        let rows = [ParameterRow {
            name: "conv1".into(),
            output_shape: vec![1, 64, 24, 24],
            params: ParamCounts {
                trainable: 4864,
                moving: 0,
            },
        }];
        let total = ParamCounts {
            trainable: 1_068_298,
            moving: 34_432,
        };
        let table = parameter_table("t", &rows, total);
        assert!(table.contains("conv1  [1, 64, 24, 24]") && table.contains("4,864"));
        assert!(table.ends_with("1,068,298 trainable parameters, 34,432 moving statistics"));
    }
}
