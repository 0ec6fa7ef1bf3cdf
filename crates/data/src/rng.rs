//! [`Rng`]: the random generator behind every seeded draw of an example (its distortions,
//! a built-in dataset's images), so the same seed gives the same examples everywhere.

/// The random generator handed to transforms and formats: a fixed, portable algorithm, so a
/// seed means the same images on every platform and release.
pub type Rng = rand::rngs::Xoshiro256PlusPlus;
