//! The all-reduce of [`Reduce::AllReduce`](super::Reduce::AllReduce) for towers that all
//! compute in host memory (flex, ndarray): each tower sums a share of the gradients over all
//! towers, and the sums are handed round by reference.
//!
//! There a tensor moves between towers without a copy (a handle to the same memory), so what
//! the ring spends on moving chunks buys nothing, while its pairwise sums read every value
//! `2 (N - 1)` times and its chunks must be joined again afterwards. Here every parameter has
//! one owner, chosen so that the towers' shares are about equal in size. Each tower sends the
//! gradients of each share to its owner (handles), the owner adds the `N` of them in tower
//! order (as [`Layout::sum`] does, so the result is the parameter device's sum, bit for bit)
//! and sends the sum to every other tower (handles again). Every tower thus ends with the very
//! same sums, and the only passes over memory are the additions: for 2 towers, 1.5 copies of
//! the gradient against the 2 an all-reduce must at least do.
//!
//! Each pair of towers has a channel of its own, so a tower that stops drops its ends and each
//! other tower gets [`PeerGone`] instead of waiting forever. Sends never block.

use std::sync::mpsc::{self, Receiver, Sender};

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};

use super::{Layout, PeerGone, summed};

/// A message between two towers: one optional gradient per parameter of a share, in slot order.
type Gradients = Vec<Option<Tensor<1>>>;

/// One tower's place among towers that share out the sums: a channel to and from every other.
pub(crate) struct ShareLink {
    rank: usize,
    /// `to[t]`: the channel to tower `t`; `None` for this tower.
    to: Vec<Option<Sender<Gradients>>>,
    /// `from[t]`: the channel from tower `t`; `None` for this tower.
    from: Vec<Option<Receiver<Gradients>>>,
}

/// The links of `size` towers, in rank order.
pub(crate) fn shared(size: usize) -> Vec<ShareLink> {
    let mut links: Vec<ShareLink> = (0..size)
        .map(|rank| ShareLink {
            rank,
            to: (0..size).map(|_| None).collect(),
            from: (0..size).map(|_| None).collect(),
        })
        .collect();
    for a in 0..size {
        for b in (0..size).filter(|&b| b != a) {
            let (send, receive) = mpsc::channel();
            links[a].to[b] = Some(send);
            links[b].from[a] = Some(receive);
        }
    }
    links
}

/// Each tower's share, the slots it sums (ascending): the largest gradients first, each to the
/// tower with the fewest values so far (the lowest rank on a tie), so that the towers' shares
/// of the additions are about equal. The same on every tower: it depends on the sizes only.
fn shares(sizes: &[usize], towers: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&s| (std::cmp::Reverse(sizes[s]), s));
    let mut load = vec![0usize; towers];
    let mut shares = vec![Vec::new(); towers];
    for s in order {
        let t = (0..towers)
            .min_by_key(|&t| (load[t], t))
            .expect("at least one tower");
        shares[t].push(s);
        load[t] += sizes[s];
    }
    shares.iter_mut().for_each(|share| share.sort_unstable());
    shares
}

impl ShareLink {
    fn send(&self, tower: usize, gradients: Gradients) -> Result<(), PeerGone> {
        let to = self.to[tower]
            .as_ref()
            .expect("a channel to every other tower");
        to.send(gradients).map_err(|_| PeerGone)
    }

    fn receive(&self, tower: usize) -> Result<Gradients, PeerGone> {
        let from = self.from[tower]
            .as_ref()
            .expect("a channel from every other tower");
        from.recv().map_err(|_| PeerGone)
    }
}

impl Layout {
    /// This tower's part of the all-reduce by shares (see the module docs): returns the sum of
    /// every tower's `grads`, on `device`. All towers must call it with the same layout. A
    /// parameter without a gradient on some tower counts as zero there; one without a gradient
    /// on any tower has none in the sum.
    pub(crate) fn shared_all_reduce(
        &self,
        link: &ShareLink,
        grads: GradientsParams,
        device: &Device,
    ) -> Result<GradientsParams, PeerGone> {
        let n = link.to.len();
        let shares = shares(&self.sizes(), n);
        let mut mine: Vec<Option<Tensor<1>>> = self.per_slot(grads);
        // Every other tower's share goes to its owner...
        for t in (0..n).filter(|&t| t != link.rank) {
            link.send(t, shares[t].iter().map(|&s| mine[s].take()).collect())?;
        }
        // ...which adds the towers' gradients in tower order.
        let mut parts: Vec<Gradients> = Vec::with_capacity(n);
        for t in 0..n {
            parts.push(match t == link.rank {
                true => (shares[link.rank].iter())
                    .map(|&s| mine[s].take())
                    .collect(),
                false => link.receive(t)?,
            });
        }
        let sums = summed(parts, device);
        // The sums go to every other tower.
        for t in (0..n).filter(|&t| t != link.rank) {
            link.send(t, sums.clone())?;
        }
        let mut total: Vec<Option<Tensor<1>>> = vec![None; mine.len()];
        for (t, share) in shares.iter().enumerate() {
            let sums = match t == link.rank {
                true => sums.clone(),
                false => link.receive(t)?,
            };
            for (&s, sum) in share.iter().zip(sums) {
                total[s] = sum.map(|g| g.to_device(device));
            }
        }
        Ok(self.unflatten_present(total))
    }
}

#[cfg(test)]
mod tests {
    use super::shares;

    #[test]
    fn shares_are_balanced_and_the_same_for_equal_sizes() {
        let sizes = [100, 1, 60, 40, 2, 3];
        let split = shares(&sizes, 2);
        let load = |t: usize| split[t].iter().map(|&s| sizes[s]).sum::<usize>();
        // 100 -> 0, 60 -> 1, 40 -> 1, 3 -> 0 (a tie), 2 -> 1, 1 -> 1.
        assert_eq!(split, vec![vec![0, 5], vec![1, 2, 3, 4]]);
        assert_eq!((load(0), load(1)), (103, 103));
        assert_eq!(shares(&[5; 4], 3), vec![vec![0, 3], vec![1], vec![2]]);
        assert_eq!(shares(&[7, 7], 1), vec![vec![0, 1]]);
    }
}
