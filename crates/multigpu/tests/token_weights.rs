//! A batch type of the user's whose parts weigh their tokens: towers over parts of uneven
//! token counts apply exactly the gradient of one device on the whole batch, with a loss
//! averaged over all its tokens (against a plain Burn step).

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use towers_multigpu::{Reduce, TowerBatch, Towers, TowersConfig, parse_devices, split_slice};
use towers_testing::compare::{assert_close, max_abs_diff, values};
use towers_testing::nets::{LR, sgd};
use towers_testing::reference::flex;

const TOLERANCE: f32 = 1e-5;

/// Per-token classes from an embedding: the smallest model with a per-token loss.
#[derive(Module, Debug)]
struct TokenNet {
    embedding: Embedding,
    out: Linear,
}

impl TokenNet {
    fn new(device: &Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(10, 4).init(device),
            out: LinearConfig::new(4, 3).init(device),
        }
    }

    /// Mean cross-entropy over the real (unpadded) tokens of `seqs`.
    fn loss(&self, seqs: &[Vec<i64>], device: &Device) -> Tensor<1> {
        let (n, len) = (seqs.len(), seqs.iter().map(Vec::len).max().unwrap());
        let pad = |f: &dyn Fn(i64) -> i64| -> Vec<i64> {
            (seqs.iter())
                .flat_map(|s| (0..len).map(move |t| s.get(t).map_or(0, |&v| f(v))))
                .collect()
        };
        let int =
            |v, shape: [usize; 2]| Tensor::<2, Int>::from_data(TensorData::new(v, shape), device);
        let tokens = int(pad(&|v| v), [n, len]);
        let classes = int(pad(&|v| v % 3), [n * len, 1]);
        let real = int(pad(&|_| 1), [n * len, 1]).float();
        let logits = self
            .out
            .forward(self.embedding.forward(tokens))
            .reshape([n * len, 3]);
        let picked = log_softmax(logits, 1).gather(1, classes);
        (picked * real.clone()).sum().neg() / real.sum()
    }
}

/// Sequences whose parts weigh their tokens, or their sequences when `by_tokens` is off.
struct Seqs {
    seqs: Vec<Vec<i64>>,
    by_tokens: bool,
}

impl TowerBatch for Seqs {
    type Part<'a> = &'a [Vec<i64>];

    fn len(&self) -> usize {
        self.seqs.len()
    }

    fn split(&self, sizes: &[usize]) -> Vec<&[Vec<i64>]> {
        split_slice(&self.seqs, sizes)
    }

    fn weights(&self, sizes: &[usize]) -> Vec<f64> {
        let parts = self.split(sizes);
        let weight = |p: &[Vec<i64>]| match self.by_tokens {
            true => p.iter().map(Vec::len).sum::<usize>() as f64,
            false => p.len() as f64,
        };
        parts.into_iter().map(weight).collect()
    }
}

/// Six sequences: the first three short, the last three long, so two halves differ in tokens.
fn seqs(seed: i64, by_tokens: bool) -> Seqs {
    let lengths = [1, 2, 3, 7, 8, 9];
    let seqs = (lengths.iter().enumerate())
        .map(|(i, &len)| {
            (0..len)
                .map(|t| (seed * 7 + i as i64 * 3 + t * 5) % 10)
                .collect()
        })
        .collect();
    Seqs { seqs, by_tokens }
}

/// Plain Burn steps on flex, one per update, each on the concatenation of its micro-batches.
fn plain(model: &TokenNet, updates: &[Vec<Seqs>]) -> Vec<f32> {
    let device = flex();
    let mut model = model.clone().fork(&device);
    let mut optim = sgd();
    for update in updates {
        let all: Vec<Vec<i64>> = update.iter().flat_map(|b| b.seqs.clone()).collect();
        let grads = GradientsParams::from_grads(model.loss(&all, &device).backward(), &model);
        model = optim.step(LR, model, grads);
    }
    values(&model)
}

fn towers(model: &TokenNet, list: &str, config: TowersConfig, updates: &[Vec<Seqs>]) -> Vec<f32> {
    let devices = parse_devices(list).unwrap();
    let mut towers = Towers::new(model.clone(), sgd(), &devices, config).unwrap();
    for batch in updates.iter().flatten() {
        let loss =
            |m: &TokenNet, part: &[Vec<i64>], device: &Device| m.loss(part, device).reshape([1]);
        towers.step(batch, LR, loss).unwrap();
    }
    values(towers.model())
}

#[test]
fn token_weighted_parts_give_the_whole_batch_gradient() {
    let model = TokenNet::new(&flex());
    let updates = vec![vec![seqs(1, true)], vec![seqs(2, true)]];
    let expected = plain(&model, &updates);
    for reduce in [Reduce::ParameterDevice, Reduce::AllReduce] {
        let config = TowersConfig::default().with_reduce(reduce);
        let got = towers(&model, "flex,flex", config, &updates);
        assert_close(&got, &expected, TOLERANCE, &format!("{reduce:?}"));
    }
    // Uneven shares too: parts of 2 and 4 sequences.
    let got = towers(&model, "flex,flex*2", TowersConfig::default(), &updates);
    assert_close(&got, &expected, TOLERANCE, "shares 1:2");
}

#[test]
fn token_weighted_micro_batches_accumulate_to_the_whole_cycle() {
    let model = TokenNet::new(&flex());
    let updates = vec![vec![seqs(3, true), seqs(4, true)]];
    let expected = plain(&model, &updates);
    for list in ["flex", "flex,flex"] {
        let config = TowersConfig::default().with_accumulation(2);
        let got = towers(&model, list, config, &updates);
        assert_close(&got, &expected, TOLERANCE, list);
    }
}

#[test]
fn weighing_parts_by_sequences_misses_the_token_mean() {
    // The same parts weighted by examples: the check above is sensitive to the weights.
    let model = TokenNet::new(&flex());
    let expected = plain(&model, &[vec![seqs(1, true)]]);
    let got = towers(
        &model,
        "flex,flex",
        TowersConfig::default(),
        &[vec![seqs(1, false)]],
    );
    let diff = max_abs_diff(&got, &expected);
    assert!(
        diff > 100.0 * TOLERANCE,
        "example weights came within {diff}"
    );
}
