//! Which pairs a mesh measures, and in which rounds: within a round no host is in two
//! pairs, so no test shares a host's NIC or CPUs with another.
//!
//! Every pair is unordered here: its slot in a round runs each test one way and then the
//! other. All pairs of N hosts are laid out by the circle method of a round-robin
//! tournament (N-1 rounds of N/2 pairs; N rounds when N is odd, each host sitting one
//! out), which no schedule can beat. A ring or random partners are laid out greedily, a
//! maximal set of disjoint pairs per round.

use std::collections::BTreeSet;

/// Which pairs to measure (`--pairs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// Every pair.
    All,
    /// Each host with the next (and the last with the first).
    Ring,
    /// This many random partners per host (at least; a host chosen by others has more).
    Random(usize),
}

impl Pairs {
    /// `--pairs all`, `ring` or `random N`.
    ///
    /// # Errors
    /// What is wrong with the words, for the user.
    pub fn parse(words: &[String]) -> Result<Pairs, String> {
        match words {
            [w] if w == "all" => Ok(Pairs::All),
            [w] if w == "ring" => Ok(Pairs::Ring),
            [w, n] if w == "random" => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(Pairs::Random(n)),
                _ => Err(format!(
                    "--pairs random N: N must be a whole number above 0, not '{n}'"
                )),
            },
            [w] if w == "random" => Err("--pairs random needs a count: --pairs random 3".into()),
            _ => Err(format!(
                "--pairs takes all, ring or random N, not '{}'",
                words.join(" ")
            )),
        }
    }
}

/// The unordered pairs (lower index first) `pairs` asks for among `n` hosts.
pub fn pair_set(n: usize, pairs: Pairs, seed: u64) -> BTreeSet<(usize, usize)> {
    let mut set = BTreeSet::new();
    match pairs {
        Pairs::All => {
            for a in 0..n {
                for b in a + 1..n {
                    set.insert((a, b));
                }
            }
        }
        Pairs::Ring => {
            if n >= 2 {
                for a in 0..n {
                    let b = (a + 1) % n;
                    set.insert((a.min(b), a.max(b)));
                }
            }
        }
        Pairs::Random(k) => {
            let mut rng = SplitMix(seed);
            let k = k.min(n.saturating_sub(1));
            for a in 0..n {
                // The other hosts in a random order; the first k not yet partners.
                let mut others: Vec<usize> = (0..n).filter(|&b| b != a).collect();
                for i in (1..others.len()).rev() {
                    let j = (rng.next() % (i as u64 + 1)) as usize;
                    others.swap(i, j);
                }
                let have = set.iter().filter(|&&(x, y)| x == a || y == a).count();
                let new: Vec<usize> = others
                    .into_iter()
                    .filter(|&b| !set.contains(&(a.min(b), a.max(b))))
                    .take(k.saturating_sub(have))
                    .collect();
                for b in new {
                    set.insert((a.min(b), a.max(b)));
                }
            }
        }
    }
    set
}

/// Rounds of disjoint pairs covering `set` exactly once; with `concurrent`, one round
/// holding every pair.
pub fn rounds(
    n: usize,
    set: &BTreeSet<(usize, usize)>,
    concurrent: bool,
) -> Vec<Vec<(usize, usize)>> {
    if set.is_empty() {
        return Vec::new();
    }
    if concurrent {
        return vec![set.iter().copied().collect()];
    }
    let all = n * n.saturating_sub(1) / 2;
    if set.len() == all {
        return circle(n);
    }
    let mut left: Vec<(usize, usize)> = set.iter().copied().collect();
    let mut out = Vec::new();
    while !left.is_empty() {
        let mut busy = vec![false; n];
        let mut round = Vec::new();
        left.retain(|&(a, b)| {
            if busy[a] || busy[b] {
                return true;
            }
            busy[a] = true;
            busy[b] = true;
            round.push((a, b));
            false
        });
        out.push(round);
    }
    out
}

/// The circle method: host `m - 1` stays put, the others turn one place a round (`m` is
/// `n` made even with a dummy host, whose partner sits the round out).
fn circle(n: usize) -> Vec<Vec<(usize, usize)>> {
    let m = n + n % 2;
    let turning = m - 1;
    (0..turning)
        .map(|r| {
            let mut round = Vec::with_capacity(m / 2);
            let mut push = |a: usize, b: usize| {
                if a < n && b < n {
                    round.push((a.min(b), a.max(b)));
                }
            };
            push(m - 1, r);
            for k in 1..m / 2 {
                push((r + k) % turning, (r + turning - k) % turning);
            }
            round.sort_unstable();
            round
        })
        .collect()
}

/// A small, fast generator with a 64-bit state (SplitMix64), enough to pick partners
/// repeatably from a seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round's hosts are distinct, and the rounds hold `set` exactly once.
    fn check(n: usize, set: &BTreeSet<(usize, usize)>, rounds: &[Vec<(usize, usize)>]) {
        let mut seen = BTreeSet::new();
        for round in rounds {
            let mut hosts = BTreeSet::new();
            for &(a, b) in round {
                assert!(a < b && b < n, "{a} {b} of {n}");
                assert!(
                    hosts.insert(a) && hosts.insert(b),
                    "a host twice in {round:?}"
                );
                assert!(seen.insert((a, b)), "({a}, {b}) twice");
            }
        }
        assert_eq!(&seen, set);
    }

    #[test]
    fn all_pairs_take_n_minus_1_rounds_of_n_over_2_or_n_rounds_when_n_is_odd() {
        for n in 2..=13 {
            let set = pair_set(n, Pairs::All, 0);
            assert_eq!(set.len(), n * (n - 1) / 2);
            let r = rounds(n, &set, false);
            check(n, &set, &r);
            if n % 2 == 0 {
                assert_eq!(r.len(), n - 1, "n = {n}");
                assert!(r.iter().all(|round| round.len() == n / 2));
            } else {
                assert_eq!(r.len(), n, "n = {n}");
                assert!(r.iter().all(|round| round.len() == (n - 1) / 2));
            }
        }
        assert_eq!(
            circle(4),
            vec![
                vec![(0, 3), (1, 2)],
                vec![(0, 2), (1, 3)],
                vec![(0, 1), (2, 3)]
            ]
        );
    }

    #[test]
    fn a_ring_pairs_each_host_with_its_neighbours_in_two_or_three_rounds() {
        assert_eq!(
            pair_set(4, Pairs::Ring, 0).into_iter().collect::<Vec<_>>(),
            [(0, 1), (0, 3), (1, 2), (2, 3)]
        );
        for n in 3..=9 {
            let set = pair_set(n, Pairs::Ring, 0);
            assert_eq!(set.len(), n);
            let r = rounds(n, &set, false);
            check(n, &set, &r);
            assert!(r.len() <= 3, "n = {n}: {r:?}");
        }
        assert_eq!(pair_set(2, Pairs::Ring, 0).len(), 1);
        assert!(pair_set(1, Pairs::Ring, 0).is_empty());
    }

    #[test]
    fn random_partners_give_each_host_at_least_k_repeatably_from_the_seed() {
        let n = 10;
        let set = pair_set(n, Pairs::Random(3), 42);
        for h in 0..n {
            let degree = set.iter().filter(|&&(a, b)| a == h || b == h).count();
            assert!(degree >= 3, "host {h}: {degree}");
        }
        assert_eq!(set, pair_set(n, Pairs::Random(3), 42));
        assert_ne!(set, pair_set(n, Pairs::Random(3), 43));
        check(n, &set, &rounds(n, &set, false));
        // More partners than hosts: everyone with everyone.
        assert_eq!(pair_set(4, Pairs::Random(9), 1), pair_set(4, Pairs::All, 0));
    }

    #[test]
    fn concurrent_is_one_round_of_every_pair() {
        let set = pair_set(5, Pairs::All, 0);
        let r = rounds(5, &set, true);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].len(), 10);
        assert!(rounds(1, &pair_set(1, Pairs::All, 0), false).is_empty());
    }

    #[test]
    fn pairs_words_parse_or_say_what_is_wrong() {
        let w = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(Pairs::parse(&w("all")), Ok(Pairs::All));
        assert_eq!(Pairs::parse(&w("ring")), Ok(Pairs::Ring));
        assert_eq!(Pairs::parse(&w("random 3")), Ok(Pairs::Random(3)));
        assert!(Pairs::parse(&w("random 0"))
            .unwrap_err()
            .contains("above 0"));
        assert!(Pairs::parse(&w("random"))
            .unwrap_err()
            .contains("needs a count"));
        assert!(Pairs::parse(&w("star"))
            .unwrap_err()
            .contains("all, ring or random N"));
        // A count goes with random only.
        assert!(Pairs::parse(&w("ring 3"))
            .unwrap_err()
            .contains("all, ring or random N"));
        assert!(Pairs::parse(&w("all 2")).is_err());
    }
}
