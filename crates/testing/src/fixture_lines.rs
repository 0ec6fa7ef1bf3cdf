//! The tab-separated fixtures that `scripts/torch_fixtures/*.py` write for single layers: a
//! case is a run of lines `SETTINGS...<TAB>NAME<TAB>VALUES`, one per tensor (`x`, `w`, `y`,
//! `dx`: input, loss weights, output, input gradient), each with the case's settings.

/// One case: its settings (the fields before the name) and each named tensor's values.
pub struct FixtureCase {
    /// The fields before each line's name, as written.
    pub settings: Vec<String>,
    /// Each tensor's values, in the order of the names asked for.
    pub values: Vec<Vec<f32>>,
}

impl FixtureCase {
    /// Setting `i` as numbers (space-separated).
    pub fn numbers(&self, i: usize) -> Vec<usize> {
        self.settings[i]
            .split(' ')
            .map(|v| v.parse().expect("a number in the settings"))
            .collect()
    }
}

/// The cases of the fixture at `path`, whose tensors come in the order `names`; panics (naming
/// the file and line) on a line out of that order, a case whose lines' settings differ, or a
/// value that is not a number.
pub fn fixture_cases(path: &str, names: &[&str]) -> Vec<FixtureCase> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lines: Vec<(usize, Vec<&str>)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split('\t').collect()))
        .collect();
    assert_eq!(lines.len() % names.len(), 0, "{path}: incomplete case");
    lines
        .chunks_exact(names.len())
        .map(|case| {
            let settings = |fields: &[&str]| -> Vec<String> {
                let settings = &fields[..fields.len().saturating_sub(2)];
                settings.iter().map(|s| s.to_string()).collect()
            };
            let first = settings(&case[0].1);
            let values = case
                .iter()
                .zip(names)
                .map(|((line, fields), name)| {
                    assert!(fields.len() >= 2, "{path}:{line}: too few fields");
                    assert_eq!(fields[fields.len() - 2], *name, "{path}:{line}: order");
                    assert_eq!(settings(fields), first, "{path}:{line}: settings");
                    let values = fields[fields.len() - 1].split(' ');
                    values
                        .map(|v| v.parse().unwrap_or_else(|_| panic!("{path}:{line}: {v}")))
                        .collect()
                })
                .collect();
            FixtureCase {
                settings: first,
                values,
            }
        })
        .collect()
}
