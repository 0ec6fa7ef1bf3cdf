//! Token sequences of uneven length on two towers, with a loss averaged over tokens: a token
//! is tagged 1 when it is larger than the one before it. The batch type tells the towers what
//! each part weighs, its tokens, so two towers whose parts hold different numbers of tokens
//! apply exactly the gradient of one device on the whole batch. Both train side by side here:
//! `cargo run --release --example sequence_tagging -- --steps 40` prints both losses (and
//! stops with an error if they part by more than 1e-5).

use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::optim::AdamConfig;
use burn::tensor::activation::{log_softmax, relu};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_towers::multigpu::{TowerBatch, Towers, TowersConfig, parse_devices, split_slice};

const VOCAB: usize = 20;

#[derive(Module, Debug)]
struct Tagger {
    embedding: Embedding,
    context: Conv1d,
    output: Linear,
}

impl Tagger {
    fn new(device: &Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(VOCAB, 16).init(device),
            context: Conv1dConfig::new(16, 32, 3)
                .with_padding(PaddingConfig1d::Same)
                .init(device),
            output: LinearConfig::new(32, 2).init(device),
        }
    }

    /// The mean cross-entropy over the real tokens of `sentences` (padding left out).
    fn loss(&self, sentences: &[Sentence], device: &Device) -> Tensor<1> {
        let (n, len) = (
            sentences.len(),
            sentences.iter().map(|s| s.tokens.len()).max().unwrap(),
        );
        let padded = |f: fn(&Sentence, usize) -> i64| -> Vec<i64> {
            (sentences.iter())
                .flat_map(|s| (0..len).map(move |t| if t < s.tokens.len() { f(s, t) } else { 0 }))
                .collect()
        };
        let int = |v: Vec<i64>, shape: [usize; 2]| {
            Tensor::<2, Int>::from_data(TensorData::new(v, shape), device)
        };
        let tokens = int(padded(|s, t| s.tokens[t]), [n, len]);
        let tags = int(padded(|s, t| s.tags[t]), [n * len, 1]);
        let real = int(padded(|_, _| 1), [n * len, 1]).float();

        // Padding reads as zeros, as past the ends of the longest sentence: the context of a
        // sentence's last tokens does not depend on how far the part is padded.
        let x = self.embedding.forward(tokens) * real.clone().reshape([n, len, 1]);
        let x = relu(self.context.forward(x.swap_dims(1, 2))).swap_dims(1, 2); // [n, len, 32]
        let logits = self.output.forward(x).reshape([n * len, 2]);
        let picked = log_softmax(logits, 1).gather(1, tags);
        let tokens_in_part = real.clone().sum();
        (picked * real).sum().neg() / tokens_in_part
    }
}

#[derive(Clone, Debug)]
struct Sentence {
    tokens: Vec<i64>,
    tags: Vec<i64>,
}

/// A batch of sentences whose parts weigh what their tokens count.
struct Sentences(Vec<Sentence>);

impl TowerBatch for Sentences {
    type Part<'a> = &'a [Sentence];

    fn len(&self) -> usize {
        self.0.len()
    }

    fn split(&self, sizes: &[usize]) -> Vec<&[Sentence]> {
        split_slice(&self.0, sizes)
    }

    fn weights(&self, sizes: &[usize]) -> Vec<f64> {
        let tokens = |part: &[Sentence]| part.iter().map(|s| s.tokens.len()).sum::<usize>();
        self.split(sizes)
            .into_iter()
            .map(|p| tokens(p) as f64)
            .collect()
    }
}

/// Sentence `index`: 2 to 24 tokens from a fixed pseudo-random stream.
fn sentence(index: u64) -> Sentence {
    let mut state = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let len = 2 + next(23) as usize;
    let tokens: Vec<i64> = (0..len).map(|_| next(VOCAB as u64) as i64).collect();
    let tags = (0..len)
        .map(|t| i64::from(t > 0 && tokens[t] > tokens[t - 1]))
        .collect();
    Sentence { tokens, tags }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--steps");
    let steps: u64 = at
        .and_then(|i| args.get(i + 1))
        .map_or(Ok(40), |s| s.parse())?;

    let device = Device::flex().autodiff();
    device.seed(3);
    let model = Tagger::new(&device);
    let towers = |list: &str| {
        let devices = parse_devices(list)?;
        Towers::new(
            model.clone(),
            AdamConfig::new().init(),
            &devices,
            TowersConfig::default(),
        )
    };
    let (mut one, mut two) = (towers("flex")?, towers("flex,flex")?);
    let loss = |m: &Tagger, part: &[Sentence], device: &Device| m.loss(part, device).reshape([1]);
    for step in 1..=steps {
        let batch = Sentences((step * 16..step * 16 + 16).map(sentence).collect());
        let whole = one.step(&batch, 0.01, loss)?.loss;
        let split = two.step(&batch, 0.01, loss)?.loss;
        let close = (whole - split).abs() <= 1e-5 * whole.abs().max(1.0);
        anyhow::ensure!(close, "step {step}: one device {whole}, 2 towers {split}");
        if step % 10 == 0 || step == 1 {
            let tokens = batch.weights(&[8, 8]);
            println!(
                "step {step}, loss = {whole:.6} (one device), {split:.6} (2 towers: {tokens:?} tokens)"
            );
        }
    }
    Ok(())
}
